package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// podIdentity is what a pod's DNS name is made of.
type podIdentity struct{ Hostname, Subdomain string }

func TestDesiredPodDNSIdentity(t *testing.T) {
	cases := map[string]struct {
		ps      *podsetv1alpha1.PodSet
		ordinal int
		want    podIdentity
	}{
		"no serviceName: neither, as before serviceName existed": {
			ps: makePodSet("web").Obj(), ordinal: 0,
		},
		"serviceName: hostname is the pod's own name, subdomain the Service": {
			ps: makePodSet("web").ServiceName("web-dns").Obj(), ordinal: 2,
			want: podIdentity{Hostname: "web-2", Subdomain: "web-dns"},
		},
		"a template subdomain without serviceName (a release before it): the pod gets its name as hostname too": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := makePodSet("web").Obj()
				ps.Spec.Template.Spec.Subdomain = "old"
				return ps
			}(),
			ordinal: 1,
			want:    podIdentity{Hostname: "web-1", Subdomain: "old"},
		},
		"a template hostname beside serviceName (admission refuses it; stored before): each pod's own name wins": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := makePodSet("web").ServiceName("svc").Obj()
				ps.Spec.Template.Spec.Hostname = "same-for-all"
				return ps
			}(),
			ordinal: 0,
			want:    podIdentity{Hostname: "web-0", Subdomain: "svc"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ac, err := PodFromTemplate(tc.ps, PodTemplate(tc.ps), tc.ordinal, TemplateHash(tc.ps))
			if err != nil {
				t.Fatal(err)
			}
			got := podIdentity{ptr.Deref(ac.Spec.Hostname, ""), ptr.Deref(ac.Spec.Subdomain, "")}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hostname and subdomain (-want +got):\n%s", diff)
			}
			if desired, err := DesiredPod(tc.ps, tc.ordinal); err != nil || !cmp.Equal(desired, ac) {
				t.Errorf("DesiredPod() differs from PodFromTemplate(PodTemplate()) (err %v)", err)
			}
		})
	}
}

func TestPodTemplateLeavesThePodSetAlone(t *testing.T) {
	ps := makePodSet("web").ServiceName("svc").Obj()
	before := ps.DeepCopy()
	if got := PodTemplate(ps); got.Spec.Subdomain != "svc" {
		t.Errorf("PodTemplate().Spec.Subdomain = %q, want svc", got.Spec.Subdomain)
	}
	if diff := cmp.Diff(before, ps); diff != "" {
		t.Errorf("PodTemplate changed the PodSet (-before +after):\n%s", diff)
	}
	if plain := makePodSet("web").Obj(); PodTemplate(plain) != &plain.Spec.Template {
		t.Errorf("without serviceName, PodTemplate is not spec.template itself")
	}
}

// TestServiceNameChangeRecreates checks how a pod of one revision moves to
// the next when spec.serviceName is part of the change: a running pod's
// hostname and subdomain cannot change, so it is recreated; an image
// change beside an unchanged serviceName stays in place.
func TestServiceNameChangeRecreates(t *testing.T) {
	gated := makePod("web-0").obj()
	gated.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
	cases := map[string]struct {
		from, to string
		image    bool
		policy   podsetv1alpha1.PodUpdatePolicy
		want     UpdateWay
	}{
		"set":                          {to: "svc", want: UpdateWay{Why: WhyServiceName}},
		"changed":                      {from: "svc", to: "other", want: UpdateWay{Why: WhyServiceName}},
		"removed":                      {from: "svc", want: UpdateWay{Why: WhyServiceName}},
		"changed beside an image":      {from: "svc", to: "other", image: true, want: UpdateWay{Why: WhyServiceName}},
		"kept, an image: in place":     {from: "svc", to: "svc", image: true, want: UpdateWay{InPlace: true, Images: []string{"app"}, Restarts: []string{"app"}}},
		"kept, a label: in place":      {from: "svc", to: "svc", want: UpdateWay{InPlace: true}},
		"changed under Recreate":       {from: "svc", to: "other", policy: podsetv1alpha1.RecreateUpdatePolicy, want: UpdateWay{Why: WhyPolicy}},
		"none either side, an image":   {image: true, want: UpdateWay{InPlace: true, Images: []string{"app"}, Restarts: []string{"app"}}},
		"none either side, only label": {want: UpdateWay{InPlace: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := makePodSet("web").ServiceName(tc.from).Obj()
			old.Spec.UpdateStrategy.PodUpdatePolicy = tc.policy
			cur := old.DeepCopy()
			cur.Spec.ServiceName = tc.to
			cur.Spec.Template.Labels["rev"] = "2"
			if tc.image {
				cur.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
			}
			if TemplateHash(old) == TemplateHash(cur) {
				t.Fatalf("the two revisions have one hash")
			}
			got := updateWayFor(cur, PodTemplate(old), PodTemplate(cur), &gated)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("updateWayFor() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceNameInTheTemplateHash(t *testing.T) {
	base := makePodSet("web").Obj()
	cases := map[string]struct {
		ps       *podsetv1alpha1.PodSet
		wantSame bool
	}{
		"empty serviceName: the hash of a PodSet from before serviceName": {ps: makePodSet("web").ServiceName("").Obj(), wantSame: true},
		"serviceName set": {ps: makePodSet("web").ServiceName("svc").Obj()},
		"serviceName in the template's subdomain instead": {ps: func() *podsetv1alpha1.PodSet {
			ps := makePodSet("web").Obj()
			ps.Spec.Template.Spec.Subdomain = "svc"
			return ps
		}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := TemplateHash(tc.ps) == TemplateHash(base); got != tc.wantSame {
				t.Errorf("TemplateHash() same as without serviceName: %v, want %v", got, tc.wantSame)
			}
		})
	}
	a, b := makePodSet("web").ServiceName("a").Obj(), makePodSet("web").ServiceName("b").Obj()
	if TemplateHash(a) == TemplateHash(b) {
		t.Errorf("two serviceNames give one hash")
	}
}

func TestPodUpdateKeepsTheHostnameAndSubdomainThePodHas(t *testing.T) {
	cases := map[string]struct {
		ps   *podsetv1alpha1.PodSet
		pod  podIdentity
		want podIdentity
	}{
		"made with serviceName: both kept": {
			ps:   makePodSet("web").ServiceName("svc").Obj(),
			pod:  podIdentity{"web-0", "svc"},
			want: podIdentity{"web-0", "svc"},
		},
		"made from a template subdomain by a release that set no hostname: none sent": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := makePodSet("web").Obj()
				ps.Spec.Template.Spec.Subdomain = "svc"
				return ps
			}(),
			pod:  podIdentity{"", "svc"},
			want: podIdentity{"", "svc"},
		},
		"no serviceName: none": {ps: makePodSet("web").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := makePod("web-0").controlledBy(tc.ps).obj()
			pod.Spec.Hostname, pod.Spec.Subdomain = tc.pod.Hostname, tc.pod.Subdomain
			// Through the slim cache, as a pass reads the pod.
			slim, err := SlimPod(&pod)
			if err != nil {
				t.Fatal(err)
			}
			ac, err := PodUpdate(tc.ps, PodTemplate(tc.ps), slim.(*corev1.Pod), TemplateHash(tc.ps))
			if err != nil {
				t.Fatal(err)
			}
			got := podIdentity{ptr.Deref(ac.Spec.Hostname, ""), ptr.Deref(ac.Spec.Subdomain, "")}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hostname and subdomain sent (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRevisionSpecUndoesPodTemplate checks that a rollback to a revision
// (kubectl podset rollout undo) gives back the serviceName its pods were
// made with, and a PodSet whose revision hash is the revision's.
func TestRevisionSpecUndoesPodTemplate(t *testing.T) {
	for _, serviceName := range []string{"", "svc"} {
		ps := makePodSet("web").ServiceName(serviceName).Obj()
		cr := newRevision(ps, TemplateHash(ps), 1)
		stored, err := RevisionTemplate(cr)
		if err != nil {
			t.Fatal(err)
		}
		back := makePodSet("web").Obj()
		back.Spec.Template, back.Spec.ServiceName = RevisionSpec(stored)
		if diff := cmp.Diff(ps.Spec, back.Spec); diff != "" {
			t.Errorf("serviceName %q: the spec a rollback writes (-want +got):\n%s", serviceName, diff)
		}
		if TemplateHash(back) != TemplateHash(ps) {
			t.Errorf("serviceName %q: the rolled-back PodSet has another hash", serviceName)
		}
	}
}
