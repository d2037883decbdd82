package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
)

// Options are what may differ between two instances of the operator; the
// rest (its scheme, cache, field manager, backoff) is the same everywhere.
type Options struct {
	// Namespaces the operator watches; all when empty (--namespaces).
	Namespaces []string
	// MaxConcurrentReconciles is how many PodSets are reconciled at once
	// (--max-concurrent-reconciles); DefaultMaxConcurrentReconciles when 0.
	MaxConcurrentReconciles int
	// Workers bounds the pod writes one pass sends at once
	// (--pod-write-workers); DefaultWorkers when 0.
	Workers int
	// Clock is the time every pass reads; the real clock when nil.
	Clock clock.PassiveClock
	// Metrics is where the operator's metrics are registered while its
	// manager runs: controller-runtime's registry, which the manager's
	// metrics endpoint serves, when nil. Operators that run at once in one
	// process (tests) each need their own.
	Metrics prometheus.Registerer
}

// NewScheme is the operator's scheme: the core Kubernetes types and the
// PodSet API.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), podsetv1alpha1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	return scheme, nil
}

// NewManager is the one way the operator is built, by main.go, the test
// suites and the benchmark alike: a manager with the operator's scheme and
// cache, and the PodSet controller registered. mo carries what the caller
// decides (metrics, probes, leader election); its Scheme, Cache and
// MapperProvider are replaced. Start the manager to run the operator.
func NewManager(ctx context.Context, cfg *rest.Config, mo manager.Options, o Options) (manager.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	mo.Scheme = scheme
	mo.Cache = CacheOptions(o.Namespaces)
	mo.MapperProvider = newMapper
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if o.MaxConcurrentReconciles < 1 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	pods, err := podClient(mgr)
	if err != nil {
		return nil, err
	}
	r := &PodSetReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		writes:     apiWriter{client: mgr.GetClient(), pods: pods, recorder: mgr.GetEventRecorder(FieldManager)},
		Clock:      o.Clock,
		Workers:    o.Workers,
		Registerer: o.Metrics,
	}
	if err := r.SetupWithManager(ctx, mgr, ReconcileOptions(o.MaxConcurrentReconciles)); err != nil {
		return nil, fmt.Errorf("setting up the PodSet controller: %w", err)
	}
	return mgr, nil
}

// podClient is the typed client of pods that the reconciler writes pods
// with: over the manager's HTTP client (one connection), with at most
// MaxPodWritesInFlight of its requests in flight, asking for protobuf
// answers, which the API server encodes and the operator decodes at a
// fraction of JSON's cost.
func podClient(mgr manager.Manager) (corev1client.PodsGetter, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	hc := *mgr.GetHTTPClient()
	hc.Transport = limitInFlight(hc.Transport, MaxPodWritesInFlight)
	c, err := corev1client.NewForConfigAndClient(cfg, &hc)
	if err != nil {
		return nil, fmt.Errorf("creating the pod client: %w", err)
	}
	return c, nil
}
