package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestModelBasedRandomSteps interleaves random scale changes, template
// changes, pod deletions and PodSet deletions (the test plays the garbage
// collector, which envtest lacks), under injected API errors, and checks the
// invariants after every round.
//
// It is seeded and reproducible: RELIABILITY_SEED picks the seed (default
// 1), RELIABILITY_STEPS the steps per round (default 25). SOAK_DURATION
// (e.g. 10m, set by `make soak`) repeats rounds until it has passed, and
// SOAK_FAULT_RATE sets the share of requests failed (default 0.05).
func TestModelBasedRandomSteps(t *testing.T) {
	seed := envUint(t, "RELIABILITY_SEED", 1)
	steps := int(envUint(t, "RELIABILITY_STEPS", 25))
	duration, err := time.ParseDuration(envString("SOAK_DURATION", "0s"))
	if err != nil {
		t.Fatalf("SOAK_DURATION: %v", err)
	}
	rate, err := strconv.ParseFloat(envString("SOAK_FAULT_RATE", "0.05"), 64)
	if err != nil {
		t.Fatalf("SOAK_FAULT_RATE: %v", err)
	}
	rng := rand.New(rand.NewPCG(seed, seed))

	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	faults := &faultyTransport{rng: rand.New(rand.NewPCG(seed, seed+1)), rate: rate}
	op := startOperator(t, ns, operatorOptions{transport: faults.wrap})
	faults.on.Store(true) // after start-up: a failed start is a crash, retried by Kubernetes
	kubelet(t, ns)
	garbageCollector(t, ns)
	// A Service selects the pods, as where users run them: the drains
	// wait for the slices to drop a pod, as they do there.
	testenv.ServeEndpoints(t, env.Client, ns)
	names := []string{"a", "b"}
	for _, n := range names {
		soakPodSet(ns, n, int32(rng.IntN(6))).Create(t, env.Client)
	}

	images := []string{"busybox:1.35", "busybox:1.36", "busybox:1.37"}
	start := time.Now()
	operations, violations, rounds := 0, 0, 0
	for {
		for range steps {
			operations++
			name := names[rng.IntN(len(names))]
			key := types.NamespacedName{Namespace: ns, Name: name}
			switch step := rng.IntN(10); {
			case step < 4:
				n := int32(rng.IntN(11))
				update(t, key, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = &n })
			case step < 6:
				img := images[rng.IntN(len(images))]
				update(t, key, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Image = img })
			case step < 9:
				pods := livePods(t, ns)
				if len(pods) > 0 {
					p := pods[rng.IntN(len(pods))]
					_ = env.Client.Delete(t.Context(), &p)
				}
			default:
				recreate(t, key, int32(rng.IntN(6)))
			}
			if rng.IntN(4) == 0 {
				converged(t, ns)
			} else {
				time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			}
		}
		rounds++
		// The invariants are checked with the faults off: a write whose answer
		// was lost is retried, maybe before the cache shows it landed, which
		// costs an idempotent write, not a loop. With faults off, any write
		// in a quiet second is a bug.
		faults.on.Store(false)
		violations += checkInvariants(t, ns, nil, op)
		faults.on.Store(true)
		if time.Since(start) >= duration {
			break
		}
	}
	drains := op.drains.Load()
	t.Logf("seed %d: %d rounds, %d operations, %d faults injected, %d invariant violations, %d drains begun, %s",
		seed, rounds, operations, faults.injected.Load(), violations, drains, time.Since(start).Round(time.Second))
	if duration >= time.Minute && drains == 0 {
		t.Errorf("a soak of %v drained no pod: every stop of a Ready pod that a Service selects should drain", duration)
	}
}

// recreate deletes a PodSet and creates it again under the same name once
// it is gone; its old pods go by the garbage collector.
func recreate(t *testing.T, key types.NamespacedName, replicas int32) {
	t.Helper()
	old := &podsetv1alpha1.PodSet{}
	if err := env.Client.Get(t.Context(), key, old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PodSet gone", func(context.Context) error {
		if err := env.Client.Get(t.Context(), key, &podsetv1alpha1.PodSet{}); !isGone(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	soakPodSet(key.Namespace, key.Name, replicas).Create(t, env.Client)
}

// soakPodSet is a PodSet of the soak.
func soakPodSet(ns, name string, replicas int32) *fixture.PodSetBuilder {
	return fixture.PodSet(ns, name).Replicas(replicas)
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envUint(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(envString(name, strconv.FormatUint(def, 10)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}
