package reliability_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestRestartWhileANodeIsLostStillReplacesItsPod loses a node, stops the
// operator before its pod is due for replacement and starts a new one, with
// empty memory, after: the delay is counted from the node's own times, so
// the new operator replaces the pod as the first would have.
func TestRestartWhileANodeIsLostStillReplacesItsPod(t *testing.T) {
	const after = 4
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	healthy, lost := ns+"-healthy", ns+"-lost"
	testenv.MakeNode(t, env.Client, healthy)
	testenv.MakeNode(t, env.Client, lost)
	first := startOperator(t, ns, operatorOptions{})
	fixture.PodSet(ns, "web").Replicas(2).Recreate().LostNodeAfter(after).Create(t, env.Client)
	markPodsReady(t, ns, 2)
	testenv.BindPod(t, env.Client, ns, "web-0", healthy)
	web1 := testenv.BindPod(t, env.Client, ns, "web-1", lost)
	// Evicted by the taint manager: Terminating, with no kubelet to
	// confirm.
	if err := env.Client.Delete(t.Context(), web1); err != nil {
		t.Fatal(err)
	}
	lostAt := time.Now().Truncate(time.Second)
	testenv.SetNodeReady(t, env.Client, lost, corev1.ConditionUnknown, lostAt)

	// The first operator saw the node lost and waits for the delay; it
	// stops, as a crash would, before the delay is over.
	time.Sleep(time.Second)
	first.stop()
	time.Sleep(time.Until(lostAt.Add(after*time.Second + time.Second)))
	got := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(web1), got); err != nil || got.UID != web1.UID {
		t.Fatalf("web-1 changed while no operator ran: %v", err)
	}
	startOperator(t, ns, operatorOptions{})
	eventually(t, "web-1 replaced by the new operator", func(context.Context) error {
		got := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(web1), got); err != nil {
			return err
		}
		if got.UID == web1.UID {
			return fmt.Errorf("web-1 is still the pod on the lost node")
		}
		return nil
	})
	eventually(t, "status.lostNodeReplacements 1", func(context.Context) error {
		ps := &podsetv1alpha1.PodSet{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, ps); err != nil {
			return err
		}
		if ps.Status.LostNodeReplacements != 1 {
			return fmt.Errorf("status.lostNodeReplacements %d, want 1", ps.Status.LostNodeReplacements)
		}
		return nil
	})
}
