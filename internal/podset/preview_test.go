package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// previewOf is the preview of the template change made by change on a
// PodSet of replicas pods, all ready on the template before it; unready
// names the ordinals whose pods are not Ready.
func previewOf(t *testing.T, replicas int32, change func(*podsetv1alpha1.PodSet), unready ...int) Preview {
	t.Helper()
	old := makePodSet("web").Replicas(replicas).Obj()
	oldHash := TemplateHash(old)
	var pods []corev1.Pod
	for ordinal := range int(replicas) {
		pod := storedPod(t, old, ordinal, oldHash)
		for _, u := range unready {
			if u == ordinal {
				pod.Status.Conditions[0].Status = corev1.ConditionFalse
			}
		}
		pods = append(pods, pod)
	}
	ps := old.DeepCopy()
	change(ps)
	revs := NewRevisions(ps, nil)
	revs.Templates[oldHash] = &old.Spec.Template
	return NewView(ps, revs, pods, testNow).Preview()
}

// previewSummary is a preview reduced to what a user reads.
type previewSummary struct {
	Changes map[string]Change
	Why     map[string]string
	Fields  map[string][]string
	AtOnce  []string
	Batches [][]string
	Waiting []string
	Changed bool
}

func summarize(p Preview) previewSummary {
	s := previewSummary{Changes: map[string]Change{}, AtOnce: p.AtOnce, Batches: p.Batches, Waiting: p.Waiting, Changed: p.Changed()}
	for _, c := range p.Pods {
		s.Changes[c.Name] = c.Change
		if c.Why != "" {
			if s.Why == nil {
				s.Why = map[string]string{}
			}
			s.Why[c.Name] = c.Why
		}
		if len(c.Fields) > 0 {
			if s.Fields == nil {
				s.Fields = map[string][]string{}
			}
			s.Fields[c.Name] = c.Fields
		}
	}
	return s
}

// all maps each of the first n pods of web to change.
func all(n int, change Change) map[string]Change {
	out := map[string]Change{}
	for o := range n {
		out[PodName("web", o)] = change
	}
	return out
}

func TestPreview(t *testing.T) {
	image := func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" }
	maxUnavailable := func(n int32) func(*podsetv1alpha1.PodSet) {
		return func(ps *podsetv1alpha1.PodSet) {
			if ps.Spec.UpdateStrategy.RollingUpdate == nil {
				ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{}
			}
			ps.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(n))
		}
	}
	both := func(fs ...func(*podsetv1alpha1.PodSet)) func(*podsetv1alpha1.PodSet) {
		return func(ps *podsetv1alpha1.PodSet) {
			for _, f := range fs {
				f(ps)
			}
		}
	}
	cpu := func(restart bool) func(*podsetv1alpha1.PodSet) {
		return func(ps *podsetv1alpha1.PodSet) {
			c := &ps.Spec.Template.Spec.Containers[0]
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}
			if restart {
				c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
			}
		}
	}
	cases := map[string]struct {
		replicas int32
		change   func(*podsetv1alpha1.PodSet)
		unready  []int
		want     previewSummary
	}{
		"nothing": {
			replicas: 3, change: func(*podsetv1alpha1.PodSet) {},
			want: previewSummary{Changes: all(3, ChangeNone)},
		},
		"an image, 5 pods, maxUnavailable 2: batches of 2, 2, 1 from the highest ordinal": {
			replicas: 5, change: both(image, maxUnavailable(2)),
			want: previewSummary{Changes: all(5, ChangeImage), Changed: true,
				Batches: [][]string{{"web-4", "web-3"}, {"web-2", "web-1"}, {"web-0"}}},
		},
		"an unready pod goes first, outside the budget it already takes": {
			replicas: 5, change: both(image, maxUnavailable(2)), unready: []int{1},
			want: previewSummary{Changes: all(5, ChangeImage), Changed: true,
				Batches: [][]string{{"web-1", "web-4"}, {"web-3", "web-2"}, {"web-0"}}},
		},
		"labels only: every pod at once": {
			replicas: 3, change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Labels["release"] = "2" },
			want: previewSummary{Changes: all(3, ChangeMetadata), Changed: true, AtOnce: []string{"web-0", "web-1", "web-2"}},
		},
		"cpu, no restart": {
			replicas: 2, change: cpu(false),
			want: previewSummary{Changes: all(2, ChangeResize), Changed: true, Batches: [][]string{{"web-1"}, {"web-0"}}},
		},
		"an env var: recreated, naming it": {
			replicas: 2, change: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DEBUG", Value: "1"}}
			},
			want: previewSummary{Changes: all(2, ChangeRecreate), Changed: true,
				Why:     map[string]string{"web-0": whyTemplate, "web-1": whyTemplate},
				Fields:  map[string][]string{"web-0": {"spec.containers[app].env"}, "web-1": {"spec.containers[app].env"}},
				Batches: [][]string{{"web-1"}, {"web-0"}}},
		},
		"Recreate policy": {
			replicas: 1, change: both(image, func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
			}),
			want: previewSummary{Changes: all(1, ChangeRecreate), Changed: true, Why: map[string]string{"web-0": WhyPolicy},
				Batches: [][]string{{"web-0"}}},
		},
		"partition 3 of 5 holds web-0 to web-2": {
			replicas: 5, change: both(image, maxUnavailable(2), func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](3)
			}),
			want: previewSummary{Changed: true, Changes: map[string]Change{
				"web-0": ChangeHeldByPartition, "web-1": ChangeHeldByPartition, "web-2": ChangeHeldByPartition,
				"web-3": ChangeImage, "web-4": ChangeImage,
			}, Batches: [][]string{{"web-4", "web-3"}}},
		},
		"an unready pod the partition holds takes the whole budget: the rest waits": {
			replicas: 3, unready: []int{0}, change: both(image, func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{Partition: ptr.To[int32](1)}
			}),
			want: previewSummary{Changed: true, Changes: map[string]Change{
				"web-0": ChangeHeldByPartition, "web-1": ChangeImage, "web-2": ChangeImage,
			}, Waiting: []string{"web-1", "web-2"}},
		},
		"OnDelete holds every pod": {
			replicas: 2, change: both(image, func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.Type = podsetv1alpha1.OnDeleteStrategyType
			}),
			want: previewSummary{Changes: all(2, ChangeHeldOnDelete)},
		},
		"scale from 2 to 4 and back to 1": {
			replicas: 2, change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](1) },
			want: previewSummary{Changed: true, Changes: map[string]Change{"web-0": ChangeNone, "web-1": ChangeDelete}, AtOnce: []string{"web-1"}},
		},
		"a serviceName recreates every pod, within the budget": {
			replicas: 2, change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "web" },
			want: previewSummary{Changed: true, Changes: all(2, ChangeRecreate),
				Why:     map[string]string{"web-0": WhyServiceName, "web-1": WhyServiceName},
				Batches: [][]string{{"web-1"}, {"web-0"}}},
		},
		"scale up": {
			replicas: 1, change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](3) },
			want: previewSummary{Changed: true, Changes: map[string]Change{"web-0": ChangeNone, "web-1": ChangeCreate, "web-2": ChangeCreate},
				AtOnce: []string{"web-1", "web-2"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summarize(previewOf(t, tc.replicas, tc.change, tc.unready...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Preview() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreviewRestartsPerResizePolicy(t *testing.T) {
	p := previewOf(t, 1, func(ps *podsetv1alpha1.PodSet) {
		c := &ps.Spec.Template.Spec.Containers[0]
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	})
	// A new resizePolicy is itself a change a running pod cannot take.
	if got := p.Pods[0]; got.Change != ChangeRecreate || !cmp.Equal(got.Fields, []string{"spec.containers[app].resizePolicy"}) {
		t.Errorf("a new resizePolicy: %s %v, want recreated for spec.containers[app].resizePolicy", got.Change, got.Fields)
	}
}

func TestPreviewOfAnInfeasibleResize(t *testing.T) {
	ps := makePodSet("web").Replicas(1).Obj()
	pod := storedPod(t, ps, 0, TemplateHash(ps))
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible,
	})
	p := NewView(ps, NewRevisions(ps, nil), []corev1.Pod{pod}, testNow).Preview()
	want := previewSummary{Changes: all(1, ChangeRecreate), Why: map[string]string{"web-0": whyInfeasible},
		Batches: [][]string{{"web-0"}}, Changed: true}
	if diff := cmp.Diff(want, summarize(p)); diff != "" {
		t.Errorf("Preview() of a pod whose resize is Infeasible (-want +got):\n%s", diff)
	}
}

func TestPreviewOfANewPodSet(t *testing.T) {
	ps := makePodSet("web").Replicas(3).Obj()
	p := NewView(ps, NewRevisions(ps, nil), nil, testNow).Preview()
	got := summarize(p)
	want := previewSummary{Changes: all(3, ChangeCreate), AtOnce: []string{"web-0", "web-1", "web-2"}, Changed: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Preview() of a PodSet without pods (-want +got):\n%s", diff)
	}
}

func TestRecreateFields(t *testing.T) {
	base := makePodSet("web").Obj().Spec.Template
	cases := map[string]struct {
		change func(*corev1.PodTemplateSpec)
		want   []string
	}{
		"image and cpu only: nothing": {change: func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Image = "busybox:1.37"
			t.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}},
		"a command": {
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Command = []string{"sleep", "1"} },
			want:   []string{"spec.containers[app].command"},
		},
		"an env var changed": {
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
			},
			want: []string{"spec.containers[app].env"},
		},
		"a second container": {
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: "sidecar", Image: "envoy"})
			},
			want: []string{"spec.containers[sidecar]"},
		},
		"ephemeral storage and the node selector": {
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
				t.Spec.NodeSelector = map[string]string{"zone": "a"}
			},
			want: []string{"spec.containers[app].resources.limits", "spec.nodeSelector"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			to := base.DeepCopy()
			tc.change(to)
			if diff := cmp.Diff(tc.want, RecreateFields(&base, to)); diff != "" {
				t.Errorf("RecreateFields() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreviewWithOrdinalsStart checks the preview of a set numbered from
// spec.ordinals.start: the partition holds back the first ordinals from
// start, as the planner does, and the rollout goes from the highest.
func TestPreviewWithOrdinalsStart(t *testing.T) {
	old := makePodSet("web").Replicas(4).Obj()
	old.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: 10}
	oldHash := TemplateHash(old)
	var pods []corev1.Pod
	for ordinal := 10; ordinal < 14; ordinal++ {
		pods = append(pods, storedPod(t, old, ordinal, oldHash))
	}
	ps := old.DeepCopy()
	ps.Spec.Template.Spec.Containers[0].Image = "b:2"
	ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{Partition: ptr.To[int32](2)}
	revs := NewRevisions(ps, nil)
	revs.Templates[oldHash] = &old.Spec.Template
	got := summarize(NewView(ps, revs, pods, testNow).Preview())
	want := map[string]Change{"web-10": ChangeHeldByPartition, "web-11": ChangeHeldByPartition, "web-12": ChangeImage, "web-13": ChangeImage}
	if diff := cmp.Diff(want, got.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"web-13"}, {"web-12"}}, got.Batches); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
}
