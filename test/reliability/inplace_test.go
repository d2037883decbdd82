package reliability_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestRestartMidInPlaceUpdateFinishesIt stops the operator while it has
// taken pods out of Ready for an in-place image update and waits for the
// kubelet to act on it (the kubelet is held back, so the stop falls there
// every time: gates closed, images not changed yet), and starts a new one
// with empty memory. Everything an update in flight needs is on the pod
// (its revision label, its gate condition, its containers' images), so the
// new operator finishes the rollout in place: the same pods, on the new
// image, gates open.
func TestRestartMidInPlaceUpdateFinishesIt(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	first := startOperator(t, ns, operatorOptions{})
	slow := kubelet(t, ns)
	// Pods whose drain hook sleeps 1 s of the 3 s drain the update asks
	// for: the operator drains them itself, so the restart comes while
	// the update is in flight, between the gate and the new image (a pod
	// whose hook holds the whole drain gets its image as soon as its
	// kubelet reports it not Ready).
	ps := fixture.PodSet(ns, "web").Replicas(3).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DrainSeconds = ptr.To[int32](1)
	}).Create(t, env.Client)
	key := types.NamespacedName{Namespace: ns, Name: ps.Name}
	converged(t, ns)
	before := podUIDs(t, ns)

	slow.Store(true)
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DrainSeconds = ptr.To[int32](3)
		ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	})
	eventually(t, "a pod taken out of Ready for the update", func(context.Context) error {
		for _, p := range livePods(t, ns) {
			if gate(&p) == corev1.ConditionFalse {
				return nil
			}
		}
		return fmt.Errorf("no gate closed yet")
	})
	first.stop()
	for _, p := range livePods(t, ns) {
		if p.Spec.Containers[0].Image != "busybox:1.36" {
			t.Fatalf("pod %s runs %s before the kubelet took it out of Ready", p.Name, p.Spec.Containers[0].Image)
		}
	}

	startOperator(t, ns, operatorOptions{})
	slow.Store(false)
	converged(t, ns)
	for _, p := range livePods(t, ns) {
		if p.Spec.Containers[0].Image != "busybox:1.37" || gate(&p) != corev1.ConditionTrue {
			t.Errorf("pod %s: image %s, gate %s; want busybox:1.37 and the gate open", p.Name, p.Spec.Containers[0].Image, gate(&p))
		}
	}
	if after := podUIDs(t, ns); !maps.Equal(before, after) {
		t.Errorf("pods were replaced across the restart: UIDs %v, then %v", before, after)
	}
}

// gate is the status of a pod's InPlaceUpdateReady condition, or "".
func gate(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == podsetv1alpha1.InPlaceUpdateReadyCondition {
			return c.Status
		}
	}
	return ""
}

func podUIDs(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, p := range livePods(t, ns) {
		out[p.Name] = p.UID
	}
	return out
}
