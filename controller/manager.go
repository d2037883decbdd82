package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// MaxBackoff caps the exponential backoff of a PodSet whose passes fail or
// stall: a stalled PodSet costs at most one refused request a minute (never
// a hot loop), and a streak of transient API errors delays a PodSet by at
// most a minute once the API server is healthy again.
const MaxBackoff = time.Minute

// CacheOptions is the manager cache the operator needs: pods only if they
// carry the PodSet name label (so memory does not grow with unrelated
// pods), and of those only what the operator reads (slimPod); the same
// for ControllerRevisions and PodDisruptionBudgets (those without their
// status, SlimBudget); no managed fields on anything; nodes slimmed to
// whether they are lost (podset.SlimNode); the given namespaces (all when
// empty).
func CacheOptions(namespaces []string) cache.Options {
	hasName, err := labels.NewRequirement(podsetv1alpha1.NameLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                {Label: labels.NewSelector().Add(*hasName), Transform: podset.SlimPod},
			&appsv1.ControllerRevision{}: {Label: labels.NewSelector().Add(*hasName)},
			// PodDisruptionBudgets without their status, which the
			// disruption controller rewrites as pods come and go.
			&policyv1.PodDisruptionBudget{}: {Label: labels.NewSelector().Add(*hasName), Transform: podset.SlimBudget},
			// Every node, as little of each as tells whether it is lost
			// (spec.lostNodeReplacement).
			&corev1.Node{}: {Transform: podset.SlimNode},
			// Every EndpointSlice, as little of each as tells which pods
			// it lists as ready (the drain waits for them).
			&discoveryv1.EndpointSlice{}: {Transform: SlimEndpointSlice},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// DefaultMaxConcurrentReconciles is how many PodSets are reconciled at
// once by default (--max-concurrent-reconciles). A pass spends most of its
// time waiting for the API server's answers, so more workers bring many
// small PodSets to Ready sooner, but sets that start together then each
// take longer and publish their progress more often. Four keeps the status
// writes down; docs/benchmarks.md ("More workers") has the measurements.
const DefaultMaxConcurrentReconciles = 4

// ReconcileOptions is the PodSet controller's configuration: concurrency,
// and per-PodSet exponential backoff from 5ms to MaxBackoff.
func ReconcileOptions(maxConcurrentReconciles int) controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: maxConcurrentReconciles,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, MaxBackoff),
	}
}
