package podset

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// storedRevision is the ControllerRevision of a PodSet's current template,
// with a number, as the cache shows it once created.
func storedRevision(ps *podsetv1alpha1.PodSet, number int64) appsv1.ControllerRevision {
	cr := newRevision(ps, TemplateHash(ps), number)
	cr.UID = types.UID(cr.Name + "-uid")
	return *cr
}

// withImage is a copy of ps with another image: another template.
func withImage(ps *podsetv1alpha1.PodSet, image string) *podsetv1alpha1.PodSet {
	ps = ps.DeepCopy()
	ps.Spec.Template.Spec.Containers[0].Image = image
	return ps
}

func TestNewRevisionSetReadsTemplatesBack(t *testing.T) {
	v1 := makePodSet("web").Obj()
	v2 := withImage(v1, "busybox:1.37")
	other := withImage(makePodSet("web").Obj(), "other:1")
	other.UID = "other-uid"
	foreign := storedRevision(other, 7)
	revs := NewRevisions(v2, []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2), foreign})

	if revs.Update != TemplateHash(v2) {
		t.Errorf("update = %s, want the current template's hash %s", revs.Update, TemplateHash(v2))
	}
	if diff := cmp.Diff(&v1.Spec.Template, revs.Templates[TemplateHash(v1)]); diff != "" {
		t.Errorf("the old revision's template read back (-want +got):\n%s", diff)
	}
	if revs.Known(TemplateHash(other)) || revs.Latest() != 2 {
		t.Errorf("a revision another PodSet controls was read: latest %d", revs.Latest())
	}
	// The pod made from the stored template is the pod made from the
	// PodSet: a revision restores exactly the template it was made of.
	fromRevision, err := PodFromTemplate(v2, revs.Templates[TemplateHash(v1)], 0, TemplateHash(v1))
	if err != nil {
		t.Fatal(err)
	}
	fromPodSet, err := PodFromTemplate(v1, &v1.Spec.Template, 0, TemplateHash(v1))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromPodSet, fromRevision); diff != "" {
		t.Errorf("pod from the revision (-from the PodSet +from the revision):\n%s", diff)
	}
	if !revs.Older(TemplateHash(v1), revs.Update) || revs.Older(revs.Update, TemplateHash(v1)) || !revs.Older("no-revision", TemplateHash(v1)) {
		t.Errorf("older() does not order legacy < v1 < current")
	}
}

func TestPlanRevisions(t *testing.T) {
	v1 := makePodSet("web").Replicas(2).Obj()
	v2, v3, v4 := withImage(v1, "b:2"), withImage(v1, "b:3"), withImage(v1, "b:4")
	h1, h3 := TemplateHash(v1), TemplateHash(v3)
	limit := func(ps *podsetv1alpha1.PodSet, n int32) *podsetv1alpha1.PodSet {
		ps = ps.DeepCopy()
		ps.Spec.RevisionHistoryLimit = &n
		return ps
	}
	history := []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2), storedRevision(v3, 3)}
	podOn := func(ps *podsetv1alpha1.PodSet, name, hash string) corev1.Pod {
		return makePod(name).controlledBy(ps).ready().hash(hash).obj()
	}
	type want struct {
		Apply string
		Rev   int64
		Prune []string
	}
	cases := map[string]struct {
		ps      *podsetv1alpha1.PodSet
		history []appsv1.ControllerRevision
		pods    func(ps *podsetv1alpha1.PodSet) []corev1.Pod
		kept    []string
		want    want
	}{
		"a new PodSet: its first revision": {
			ps: v1, want: want{Apply: "web-" + h1, Rev: 1},
		},
		"converged: nothing to write": {
			ps: v3, history: history,
			pods: func(ps *podsetv1alpha1.PodSet) []corev1.Pod { return []corev1.Pod{podOn(ps, "web-0", h3)} },
		},
		"a new template: the next number": {
			ps: v4, history: history, want: want{Apply: "web-" + TemplateHash(v4), Rev: 4},
		},
		"a rollback: the old revision becomes the newest": {
			ps: v1, history: history, want: want{Apply: "web-" + h1, Rev: 4},
		},
		"history beyond the limit: the oldest unused go": {
			ps: limit(v3, 1), history: history, want: want{Prune: []string{"web-" + h1}},
		},
		"a limit of 0 keeps only what is in use": {
			ps: limit(v3, 0), history: history, want: want{Prune: []string{"web-" + h1, "web-" + TemplateHash(v2)}},
		},
		"never a revision a pod runs, even terminating": {
			ps: limit(v3, 0), history: history,
			pods: func(ps *podsetv1alpha1.PodSet) []corev1.Pod {
				return []corev1.Pod{makePod("web-1").controlledBy(ps).hash(h1).terminating().obj()}
			},
			want: want{Prune: []string{"web-" + TemplateHash(v2)}},
		},
		"never one a held-back pod ran": {
			ps: limit(v3, 0), history: history, kept: []string{TemplateHash(v2)},
			want: want{Prune: []string{"web-" + h1}},
		},
		"a pod of another PodSet keeps nothing": {
			ps: limit(v3, 0), history: history,
			pods: func(*podsetv1alpha1.PodSet) []corev1.Pod {
				return []corev1.Pod{makePod("web-1").controlledByOther("x").hash(h1).obj()}
			},
			want: want{Prune: []string{"web-" + h1, "web-" + TemplateHash(v2)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var pods []corev1.Pod
			if tc.pods != nil {
				pods = tc.pods(tc.ps)
			}
			p := NewView(tc.ps, NewRevisions(tc.ps, tc.history), pods, time.Time{}).PlanRevisions(tc.kept)
			var got want
			if p.Write != nil {
				got.Apply, got.Rev = p.Write.Name, p.Write.Revision
				if h := p.Write.Labels[podsetv1alpha1.TemplateHashLabel]; "web-"+h != p.Write.Name {
					t.Errorf("revision %s labelled with hash %s", p.Write.Name, h)
				}
			}
			for _, cr := range p.Prune {
				got.Prune = append(got.Prune, cr.Name)
			}
			slices.Sort(got.Prune)
			slices.Sort(tc.want.Prune)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("planRevisions() (-want +got):\n%s", diff)
			}
		})
	}
}
