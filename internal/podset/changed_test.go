package podset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// watchedPod is a running, ready pod of PodSet "web" as a watch shows it.
func watchedPod() *corev1.Pod {
	ps := makePodSet("web").InitContainer("init", "busybox:1.36").Obj()
	pod := makePod("web-0").controlledBy(ps).ready().hash("h").obj()
	pod.ResourceVersion = "100"
	pod.Status.Conditions[0].LastProbeTime = metav1.Unix(1_700_000_000, 0)
	pod.Status.Conditions[0].LastTransitionTime = metav1.Unix(1_700_000_000, 0)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 0}}
	return &pod
}

func TestPodOutcomeChanged(t *testing.T) {
	cases := map[string]struct {
		change func(*corev1.Pod)
		want   bool
	}{
		"phase": {
			change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
			want:   true,
		},
		"Ready condition to False": {
			change: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
			want:   true,
		},
		"Ready condition removed": {
			change: func(p *corev1.Pod) { p.Status.Conditions = nil },
			want:   true,
		},
		"deletionTimestamp set": {
			change: func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Unix(1_700_000_100, 0)) },
			want:   true,
		},
		"a label added": {
			change: func(p *corev1.Pod) { p.Labels["team"] = "a" },
			want:   true,
		},
		"a label changed": {
			change: func(p *corev1.Pod) { p.Labels["podset.dev/template-hash"] = "other" },
			want:   true,
		},
		"a label removed": {
			change: func(p *corev1.Pod) { delete(p.Labels, "podset.dev/ordinal") },
			want:   true,
		},
		"a template annotation removed": {
			change: func(p *corev1.Pod) { delete(p.Annotations, "example.com/note") },
			want:   true,
		},
		"owner references removed": {
			change: func(p *corev1.Pod) { p.OwnerReferences = nil },
			want:   true,
		},
		"controller reference to another UID": {
			change: func(p *corev1.Pod) { p.OwnerReferences[0].UID = "other" },
			want:   true,
		},
		"controller false": {
			change: func(p *corev1.Pod) { p.OwnerReferences[0].Controller = ptr.To(false) },
			want:   true,
		},
		"blockOwnerDeletion false": {
			change: func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr.To(false) },
			want:   true,
		},
		"an owner reference added": {
			change: func(p *corev1.Pod) {
				p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "c-uid"})
			},
			want: true,
		},
		"a container image": {
			change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "busybox:evil" },
			want:   true,
		},
		"an init container image": {
			change: func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "busybox:evil" },
			want:   true,
		},
		"a status heartbeat: the Ready condition's lastProbeTime": {
			change: func(p *corev1.Pod) { p.Status.Conditions[0].LastProbeTime = metav1.Unix(1_700_000_060, 0) },
		},
		"the pod IP set while Ready is unchanged": {
			change: func(p *corev1.Pod) {
				p.Status.PodIP = "10.0.0.7"
				p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}}
			},
		},
		"a container restart count": {
			change: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 1 },
		},

		"another condition added": {
			change: func(p *corev1.Pod) {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
			},
		},
		"resourceVersion only": {
			change: func(p *corev1.Pod) { p.ResourceVersion = "101" },
		},
		"managed fields only": {
			change: func(p *corev1.Pod) {
				p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
			},
		},
		"the owner reference's name only": {
			change: func(p *corev1.Pod) { p.OwnerReferences[0].Name = "renamed" },
		},
		"no change": {
			change: func(*corev1.Pod) {},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := watchedPod()
			cur := old.DeepCopy()
			tc.change(cur)
			if got := PodOutcomeChanged(old, cur); got != tc.want {
				t.Errorf("podOutcomeChanged() = %v, want %v", got, tc.want)
			}
			if got := PodOutcomeChanged(cur, old); got != tc.want {
				t.Errorf("podOutcomeChanged() the other way round = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRestartWhileUpdatingInPlace: a real kubelet may report a container
// that restarted for an in-place update in one status, running before and
// after under the same image name; only its restart count changes.
func TestRestartWhileUpdatingInPlace(t *testing.T) {
	old := watchedPod()
	old.Status.Conditions = append(old.Status.Conditions, corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionFalse})
	cur := old.DeepCopy()
	cur.Status.ContainerStatuses[0].RestartCount = 1
	if !PodOutcomeChanged(old, cur) {
		t.Error("a restart while the gate is closed does not reach the controller")
	}
}
