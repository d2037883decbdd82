package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// spec.serviceName against the real API server: the pods carry the
// hostname and subdomain a headless Service's DNS names need (the
// EndpointSlice controller and DNS are the kwok e2e lane's and the real
// node's), an in-place update keeps them, and a new serviceName
// recreates the pods under their names, within the rollout's budget.

// wantIdentity checks that every live pod of ns has its own name as its
// hostname and subdomain as its subdomain.
func wantIdentity(t *testing.T, ns, subdomain string) {
	t.Helper()
	for name, p := range pods(t, ns) {
		if p.DeletionTimestamp == nil && (p.Spec.Hostname != name || p.Spec.Subdomain != subdomain) {
			t.Errorf("pod %s has hostname %q and subdomain %q, want %q and %q", name, p.Spec.Hostname, p.Spec.Subdomain, name, subdomain)
		}
	}
}

// watchUnavailable polls the pods of ns until the test ends and returns
// the most of names seen unavailable at once: missing, terminating or not
// Ready.
func watchUnavailable(t *testing.T, ns string, names ...string) func() int {
	var mu sync.Mutex
	most := 0
	stop := repeat(t, 10*time.Millisecond, func() {
		live := pods(t, ns)
		down := 0
		for _, n := range names {
			if p, ok := live[n]; !ok || p.DeletionTimestamp != nil || !testenv.PodReady(&p) {
				down++
			}
		}
		mu.Lock()
		most = max(most, down)
		mu.Unlock()
	})
	return func() int {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

func TestServiceNameGivesPodsTheirDNSIdentityThroughUpdatesAndRecreations(t *testing.T) {
	t.Parallel()
	ns, _ := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(3).MaxUnavailable(1).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.ServiceName = "web-dns"
	}))
	wantIdentity(t, ns, "web-dns")

	// An image in place: the same pods (hostname and subdomain cannot
	// change, and the apply to the running pods sends theirs).
	before := uids(t, ns)
	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" })
	waitForRollout(t, ps, "busybox:1.37")
	wantSamePods(t, ns, before)
	wantIdentity(t, ns, "web-dns")
	pokeAndAssertNoWrites(t, ps, "web-0")

	// A new serviceName: every pod is recreated under its name, one at a
	// time (maxUnavailable 1).
	unavailable := watchUnavailable(t, ns, "web-0", "web-1", "web-2")
	old := pods(t, ns)
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "web-peers" })
	waitForReplacement(t, ns, old, "web-0", "web-1", "web-2")
	waitForStatus(t, ps, readyStatus(3))
	if most := unavailable(); most > 1 {
		t.Errorf("%d pods were unavailable at once while serviceName rolled out, want at most maxUnavailable 1", most)
	}
	wantIdentity(t, ns, "web-peers")
	wantEvent(t, ps, podsetv1alpha1.RollingOutReason, podset.WhyServiceName, "no event says the pods were recreated for the new serviceName")

	// Removed: recreated again, with neither.
	old = pods(t, ns)
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "" })
	eventually(t, "pods without hostname and subdomain", func(context.Context) error {
		for name, p := range pods(t, ns) {
			if p.UID == old[name].UID || p.DeletionTimestamp != nil || p.Spec.Hostname != "" || p.Spec.Subdomain != "" {
				return fmt.Errorf("%s: hostname %q, subdomain %q", name, p.Spec.Hostname, p.Spec.Subdomain)
			}
		}
		return nil
	})
	waitForStatus(t, ps, readyStatus(3))
}
