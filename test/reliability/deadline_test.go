package reliability_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestRestartMidRolloutKeepsTheDeadlineClock restarts the operator in the
// middle of a rollout whose new pods never become ready. The new operator
// knows nothing but what the API server holds, and still declares the
// progress deadline at the time the first one would have, counted from the
// last progress in the status, not from its own start; and it sends no
// write until then.
func TestRestartMidRolloutKeepsTheDeadlineClock(t *testing.T) {
	const deadline = 8 * time.Second
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	first := startOperator(t, ns, operatorOptions{})
	ps := fixture.PodSet(ns, "web").Replicas(2).Create(t, env.Client)
	key := types.NamespacedName{Namespace: ns, Name: ps.Name}
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.ProgressDeadlineSeconds = ptr.To(int32(deadline / time.Second))
		// No kubelet here: pods are replaced, not restarted in place.
		ps.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
	})
	markPodsReady(t, ns, 2)
	eventually(t, "Ready", func(context.Context) error {
		return conditionIs(t, key, podsetv1alpha1.ReadyCondition, metav1.ConditionTrue)
	})

	// A template whose pods never turn ready: the first one is replaced,
	// and the rollout waits for it.
	update(t, key, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Image = "busybox:never-ready" })
	var progress metav1.Time
	eventually(t, "the new web-1 created and counted", func(context.Context) error {
		got := &podsetv1alpha1.PodSet{}
		if err := env.Client.Get(t.Context(), key, got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation || got.Status.UpdatedReplicas != 1 || got.Status.LastProgressTime == nil {
			return fmt.Errorf("status %s, want the new web-1 counted", statusSummary(got))
		}
		progress = *got.Status.LastProgressTime
		return nil
	})

	// Restart: the first operator stops, as a crash would, and a new one
	// with empty memory takes over a few seconds later.
	first.stop()
	time.Sleep(3 * time.Second)
	restart := time.Now()
	second := startOperator(t, ns, operatorOptions{})

	var stalledAt time.Time
	eventually(t, "Stalled/ProgressDeadlineExceeded", func(context.Context) error {
		got := &podsetv1alpha1.PodSet{}
		if err := env.Client.Get(t.Context(), key, got); err != nil {
			return err
		}
		c := testenv.Condition(got, podsetv1alpha1.StalledCondition)
		if c.Status != metav1.ConditionTrue || c.Reason != podsetv1alpha1.ProgressDeadlineExceededReason {
			return fmt.Errorf("Stalled is %s/%s, want True/%s", c.Status, c.Reason, podsetv1alpha1.ProgressDeadlineExceededReason)
		}
		if !got.Status.LastProgressTime.Equal(&progress) {
			t.Errorf("lastProgressTime moved from %s to %s across the restart", progress, got.Status.LastProgressTime)
		}
		stalledAt = c.LastTransitionTime.Time
		return nil
	})
	// Whole seconds: the status holds times to the second.
	if want := progress.Add(deadline); stalledAt.Before(want) || !stalledAt.Before(restart.Add(deadline).Truncate(time.Second)) {
		t.Errorf("stalled at %s; want at the deadline counted from the last progress (%s), not from the restart (%s)",
			stalledAt.Format(time.RFC3339), want.Format(time.RFC3339), restart.Add(deadline).Format(time.RFC3339))
	}
	if n := second.writes.Load(); n != 1 {
		t.Errorf("the restarted operator sent %d pod and PodSet writes, want 1 (the stalled status)", n)
	}
}

// markPodsReady waits for n pods in the namespace and marks them Running and
// Ready, as the kubelet would.
func markPodsReady(t *testing.T, ns string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d pods ready", n), func(context.Context) error {
		list := &corev1.PodList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d pods, want %d", len(list.Items), n)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if testenv.RunningAndReady(p) {
				continue
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			if err := env.Client.Status().Update(t.Context(), p); err != nil {
				return err
			}
		}
		return nil
	})
}

// conditionIs checks one condition of a PodSet, at its current generation.
func conditionIs(t *testing.T, key types.NamespacedName, typ string, want metav1.ConditionStatus) error {
	t.Helper()
	got := &podsetv1alpha1.PodSet{}
	if err := env.Client.Get(t.Context(), key, got); err != nil {
		return err
	}
	if c := testenv.Condition(got, typ); got.Status.ObservedGeneration != got.Generation || c.Status != want {
		return fmt.Errorf("%s is %q at generation %d, want %s at %d", typ, c.Status, got.Status.ObservedGeneration, want, got.Generation)
	}
	return nil
}
