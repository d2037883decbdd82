package integration

import (
	"context"
	"fmt"
	"maps"
	"testing"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestWriteRequests measures what the operator sends for a scale-up from 0
// to 100, a converged pass and a rollout of 100 pods, and asserts the pod
// writes are exactly what the work needs.
func TestWriteRequests(t *testing.T) {
	const n = 100
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	// Pods replaced; TestImageChangeUpdatesPodsInPlaceBehindTheirGate counts
	// the writes of an in-place rollout.
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(n).MaxUnavailable(10))
	podWrites, statusWrites := requests.writes(ns, "pods", ""), requests.writes(ns, "podsets", "status")
	reads := requests.count("GET", ns, "pods", "")
	t.Logf("0 -> %d: %d pod writes, %d status writes, %d uncached pod reads", n, podWrites, statusWrites, reads)
	if podWrites != n {
		t.Errorf("0 -> %d sent %d pod writes, want exactly %d", n, podWrites, n)
	}
	if reads != 0 {
		t.Errorf("0 -> %d sent %d uncached pod reads, want 0 (a create needs no check first)", n, reads)
	}

	// A converged pass: poke a pod with a label the operator does not own,
	// which passes the watch predicate and runs a pass with nothing to do.
	// The passes before it end first (repairPass), so that none of their
	// writes counts.
	repairPass(t, pods(t, ns)["web-0"])
	podWrites, statusWrites = requests.writes(ns, "pods", ""), requests.writes(ns, "podsets", "status")
	before := pods(t, ns)
	psBefore := get(t, ps)
	pokeForAPass(t, before["web-0"])
	// One pod write is pokeForAPass's repair.
	if d := requests.writes(ns, "pods", "") - podWrites - 1; d != 0 {
		t.Errorf("a converged pass sent %d pod writes, want 0", d)
	}
	if d := requests.writes(ns, "podsets", "status") - statusWrites; d != 0 {
		t.Errorf("a converged pass sent %d status writes, want 0", d)
	}
	after := pods(t, ns)
	for name, p := range after {
		if name != "web-0" && p.ResourceVersion != before[name].ResourceVersion {
			t.Errorf("pod %s changed in a converged pass", name)
		}
	}
	if get(t, ps).ResourceVersion != psBefore.ResourceVersion {
		t.Errorf("the PodSet changed in a converged pass")
	}
	t.Logf("converged pass: 0 pod writes, 0 status writes")

	// A rollout of every pod, with the test as the kubelet.
	podWrites, statusWrites = requests.writes(ns, "pods", ""), requests.writes(ns, "podsets", "status")
	setImage(t, ps, "busybox:1.37")
	eventually(t, "rollout", func(context.Context) error {
		current := pods(t, ns)
		done := 0
		for p := range maps.Values(current) {
			if p.DeletionTimestamp != nil || image(p) != "busybox:1.37" {
				continue
			}
			if !testenv.RunningAndReady(&p) {
				markReady(t, p)
			}
			done++
		}
		if done != n {
			return fmt.Errorf("%d of %d pods rolled out", done, n)
		}
		return readyStatus(n)(get(t, ps))
	})
	podWrites, statusWrites = requests.writes(ns, "pods", "")-podWrites, requests.writes(ns, "podsets", "status")-statusWrites
	t.Logf("rollout of %d: %d pod writes (deletes and creates), %d status writes", n, podWrites, statusWrites)
	if podWrites != 2*n {
		t.Errorf("a rollout of %d pods sent %d pod writes, want exactly %d (one delete and one create each)", n, podWrites, 2*n)
	}
}

func TestStatusOnlyChangeRunsNoPass(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web"))

	// Someone else writes status; the generation does not change, so the
	// operator's PodSet watch drops the event and no pass corrects it.
	statusWrites := requests.writes(ns, "podsets", "status")
	ps.Status.ReadyReplicas = 99
	if err := env.Client.Status().Update(t.Context(), ps); err != nil {
		t.Fatal(err)
	}

	// Proof that the operator has handled that event: a PodSet created
	// after it, in another namespace (the same watch, whose events the
	// operator handles in order), has had its pass, which creates its
	// pods and writes its status. Had the status-only change enqueued a
	// pass of web, that pass would have begun before this one.
	witnessNS := testenv.Namespace(t, env.Client, "podset-", nil)
	witness := fixture.PodSet(witnessNS, "witness").Replicas(3).Create(t, env.Client)
	waitForStatus(t, witness, func(got *podsetv1alpha1.PodSet) error {
		if got.Status.ObservedGeneration != got.Generation || got.Status.Replicas != 3 {
			return fmt.Errorf("status %+v, want 3 replicas at generation %d", got.Status, got.Generation)
		}
		return nil
	})

	if got := get(t, ps).Status.ReadyReplicas; got != 99 {
		t.Errorf("readyReplicas = %d: a pass ran on a status-only change", got)
	}
	if d := requests.writes(ns, "podsets", "status") - statusWrites; d != 0 {
		t.Errorf("%d status writes after a status-only change, want 0", d)
	}
}
