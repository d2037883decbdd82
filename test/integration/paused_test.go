package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// setPaused sets spec.paused.
func setPaused(t *testing.T, ps *podsetv1alpha1.PodSet, paused bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("set paused to %v", paused), func(context.Context) error {
		cur := get(t, ps)
		cur.Spec.Paused = paused
		return env.Client.Update(t.Context(), cur)
	})
}

// pausedWithChanges checks that the status of the current generation says
// the PodSet is paused with n pods of an older template pending: Ready,
// Reconciling and Stalled False with reason Paused.
func pausedWithChanges(n int32) func(*podsetv1alpha1.PodSet) error {
	return func(ps *podsetv1alpha1.PodSet) error {
		if ps.Status.ObservedGeneration != ps.Generation {
			return fmt.Errorf("generation %d not observed yet", ps.Generation)
		}
		for _, typ := range []string{podsetv1alpha1.ReadyCondition, podsetv1alpha1.ReconcilingCondition, podsetv1alpha1.StalledCondition} {
			if c := testenv.Condition(ps, typ); c.Status != metav1.ConditionFalse || c.Reason != podsetv1alpha1.PausedReason {
				return fmt.Errorf("%s %s/%s, want False/Paused", typ, c.Status, c.Reason)
			}
		}
		want := fmt.Sprintf("; %d %s an older template (spec.paused: updated once resumed)", n, map[bool]string{true: "pod runs", false: "pods run"}[n == 1])
		if msg := testenv.Condition(ps, podsetv1alpha1.ReadyCondition).Message; !strings.HasSuffix(msg, want) {
			return fmt.Errorf("Ready message %q does not end with %q", msg, want)
		}
		return nil
	}
}

// TestPausedHoldsTheRollout checks spec.paused end to end: a template
// change updates no pod, while scaling up and down and the repair of a
// deleted pod go on, each new pod on the revision the pods run; resuming
// rolls the pods out.
func TestPausedHoldsTheRollout(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(3).MaxUnavailable(1))
	before := pods(t, ns)

	setPaused(t, ps, true)
	waitForStatus(t, ps, readyStatus(3)) // nothing pending yet: still Ready
	setImage(t, ps, "busybox:1.37")
	got := waitForStatus(t, ps, pausedWithChanges(3))
	if got.Status.UpdateRevision == got.Status.CurrentRevision {
		t.Errorf("updateRevision %q = currentRevision: the new template has no revision", got.Status.UpdateRevision)
	}
	assertUntouched(t, ns, before, "web-0", "web-1", "web-2")
	// kstatus, on the status the operator wrote: in progress, as for a
	// paused Deployment with a new template, saying why.
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(podsetv1alpha1.GroupVersion.WithKind("PodSet"))
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), obj); err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(obj)
	if err != nil {
		t.Fatal(err)
	}
	if want := testenv.Condition(got, podsetv1alpha1.ReadyCondition).Message; res.Status != kstatus.InProgressStatus || res.Message != want {
		t.Errorf("kstatus %s %q, want %s %q", res.Status, res.Message, kstatus.InProgressStatus, want)
	}

	// Scaling up: the new pod runs what the others run.
	scale(t, ps, 4)
	web3 := waitForPods(t, ns, "web-0", "web-1", "web-2", "web-3")["web-3"]
	if image(web3) != "busybox:1.36" {
		t.Errorf("web-3 made while paused runs %s, want busybox:1.36 (status.currentRevision)", image(web3))
	}
	markReady(t, web3)
	waitForStatus(t, ps, pausedWithChanges(4))

	// Scaling down: pruned from the highest ordinal.
	scale(t, ps, 3)
	waitForPods(t, ns, "web-0", "web-1", "web-2")
	waitForStatus(t, ps, pausedWithChanges(3))

	// A deleted pod is made again on the revision it ran.
	forceDelete(t, before["web-1"])
	var web1 = before["web-1"]
	eventually(t, "web-1 made again", func(context.Context) error {
		p, ok := pods(t, ns)["web-1"]
		if !ok || p.UID == before["web-1"].UID || p.DeletionTimestamp != nil {
			return fmt.Errorf("web-1 not made again yet")
		}
		web1 = p
		return nil
	})
	if image(web1) != "busybox:1.36" {
		t.Errorf("web-1 made again while paused runs %s, want busybox:1.36, the revision it ran", image(web1))
	}
	markReady(t, web1)
	waitForStatus(t, ps, pausedWithChanges(3))
	assertUntouched(t, ns, before, "web-0", "web-2")

	// Resumed: the pending template rolls out, one pod at a time.
	setPaused(t, ps, false)
	markReady(t, waitForImage(t, ns, "web-2", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-1", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-0", "busybox:1.37"))
	waitForStatus(t, ps, readyStatus(3))
}
