package testenv

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// A check that the operator did nothing (wrote nothing, replaced nothing)
// proves nothing unless a pass ran: these make the operator run passes of
// one PodSet and show when they have ended.

// RepairPass makes the operator run a pass of the pod's PodSet that must
// write, and waits for that write: it removes the pod's ordinal label,
// which the operator owns and restores. The pass that restores it began
// after the removal, and passes of one PodSet never overlap, so every pass
// of the PodSet that began before the removal has ended by then, with all
// its writes sent. The repair is one pod write.
func RepairPass(t testing.TB, c client.Client, w Waiter, pod *corev1.Pod) {
	t.Helper()
	ordinal := pod.Labels[podsetv1alpha1.OrdinalLabel]
	if ordinal == "" {
		t.Fatalf("pod %s has no ordinal label to restore", pod.Name)
	}
	updatePod(t, c, pod, func(p *corev1.Pod) { delete(p.Labels, podsetv1alpha1.OrdinalLabel) })
	w.Eventually(t, "the ordinal label of "+pod.Name+" restored", func(ctx context.Context) error {
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			return err
		}
		if got.UID != pod.UID {
			return fmt.Errorf("pod %s was replaced, not repaired", pod.Name)
		}
		if l := got.Labels[podsetv1alpha1.OrdinalLabel]; l != ordinal {
			return fmt.Errorf("ordinal label %q, want %q", l, ordinal)
		}
		return nil
	})
}

// IdlePass makes the operator run a pass of a converged PodSet, one with
// nothing to do, and returns once that pass has ended with every write it
// made sent: it changes a label of the pod that the operator does not
// own, which passes the operator's pod watch, then waits for a RepairPass.
// That repair, one pod write, is the only write the caller may see.
func IdlePass(t testing.TB, c client.Client, w Waiter, pod *corev1.Pod) {
	t.Helper()
	updatePod(t, c, pod, func(p *corev1.Pod) { p.Labels["test.podset.dev/poke"] = p.ResourceVersion })
	RepairPass(t, c, w, pod)
}

// updatePod changes the latest version of a pod, retrying on conflicts.
func updatePod(t testing.TB, c client.Client, pod *corev1.Pod, change func(*corev1.Pod)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return fmt.Errorf("pod %s was replaced", pod.Name)
		}
		change(cur)
		return c.Update(t.Context(), cur)
	})
	if err != nil {
		t.Fatalf("updating pod %s: %v", pod.Name, err)
	}
}
