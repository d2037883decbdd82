package controller

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/prometheus/client_golang/prometheus"
)

// FieldManager is the field manager of every write the operator makes: pod
// applies and status applies alike, so it owns exactly what it last applied.
const FieldManager = "podset-operator"

// byPodSet is the cache index of pods and ControllerRevisions by the PodSet
// name label.
const byPodSet = "podset.dev/name"

// DefaultWorkers is how many pod writes one pass sends at once by default.
// The ReplicaSet controller sends up to 500; creates start in slow-start
// batches (1, 2, 4, ...) whatever the bound, so a refused template costs a
// few requests, not this many. The API server's priority and fairness
// queues what it cannot take at once.
const DefaultWorkers = 128

// The operator's permissions, and no more: it watches PodSets (reading
// them from its cache only), applies their status, owns pods with
// blockOwnerDeletion (which needs update on the owner's finalizers),
// creates (an apply that creates needs create and patch), applies and
// deletes pods, sets their readiness gate condition (pods/status) and
// resizes them in place (pods/resize), reads a pod whose name a create found taken, keeps its
// template revisions as ControllerRevisions (watched from its cache,
// created and updated by apply, pruned), keeps the PodDisruptionBudget of
// spec.disruptionBudget (watched from its cache, created and updated by
// apply, deleted when the field goes, and read from the API server when a
// create finds its name taken), records events, and watches nodes (from
// its cache: spec.lostNodeReplacement) and EndpointSlices (from its cache:
// the drain waits for them to drop a pod).
// test/reliability proves the operator uses every one of them.
//
// +kubebuilder:rbac:groups=podset.dev,resources=podsets,verbs=list;watch
// +kubebuilder:rbac:groups=podset.dev,resources=podsets/status,verbs=patch
// +kubebuilder:rbac:groups=podset.dev,resources=podsets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch

// PodSetReconciler keeps each PodSet's pods as its spec says.
type PodSetReconciler struct {
	// Client reads from the manager's cache. It cannot write: every write
	// goes through writes.
	Client client.Reader
	// APIReader reads from the API server directly. It is used only to find
	// out who holds a pod name that a create found taken.
	APIReader client.Reader
	// Clock is the time every pass reads.
	Clock clock.PassiveClock
	// Workers bounds the pod writes one pass sends at once, and the gates
	// of new pods opening at once over all passes.
	Workers int
	// Registerer is where the reconciler's metrics are registered while
	// its manager runs; controller-runtime's registry (the manager's
	// metrics endpoint) when nil.
	Registerer prometheus.Registerer

	// writes is where every write goes (writer): the API server's
	// (apiWriter, made by NewManager), or a test's.
	writes    writer
	memory    *memory
	metrics   *metrics
	endpoints *endpoints
	gateSlots chan struct{}
}

var _ reconcile.Reconciler = (*PodSetReconciler)(nil)

// init fills in the defaults and makes the reconciler's state: what its
// passes remember, its metrics and the slots of the gates opening. The
// writer every write goes through is set before: NewManager's or a
// test's.
func (r *PodSetReconciler) init() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Workers < 1 {
		r.Workers = DefaultWorkers
	}
	r.memory = newMemory(r.Clock)
	r.metrics = newMetrics(r.memory)
	r.endpoints = newEndpoints()
	r.gateSlots = make(chan struct{}, r.Workers)
}

// SetupWithManager registers the reconciler: PodSets by generation change,
// pods they control by the changes that matter (podChanged), spaced by
// PodEventSpacing (podEvents), their ControllerRevisions, their
// PodDisruptionBudgets by the changes that matter (budgetChanged: not the
// disruption controller's status updates), and nodes turning lost or
// found, for the PodSets with spec.lostNodeReplacement that have pods on
// them, and EndpointSlices dropping or listing their pods (sliceEvents).
func (r *PodSetReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Registerer == nil {
		r.Registerer = ctrlmetrics.Registry
	}
	r.init()
	if err := mgr.Add(r.metrics.registered(r.Registerer)); err != nil {
		return fmt.Errorf("adding the metrics: %w", err)
	}
	nameLabel := func(o client.Object) []string { return []string{o.GetLabels()[podsetv1alpha1.NameLabel]} }
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, byPodSet, nameLabel); err != nil {
		return fmt.Errorf("indexing pods by PodSet: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &appsv1.ControllerRevision{}, byPodSet, nameLabel); err != nil {
		return fmt.Errorf("indexing ControllerRevisions by PodSet: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, byNode, podNode); err != nil {
		return fmt.Errorf("indexing pods by node: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&podsetv1alpha1.PodSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, r.podEvents(), builder.WithPredicates(podChanged)).
		Owns(&appsv1.ControllerRevision{}).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(budgetChanged)).
		Watches(&corev1.Node{}, r.podSetsOnNode(), builder.WithPredicates(nodeReachabilityChanged)).
		Watches(&discoveryv1.EndpointSlice{}, r.sliceEvents()).
		WithOptions(opts).
		Complete(r)
}

// Reconcile brings one PodSet's pods and status in line with its spec, in
// named phases over one pass (docs/architecture.md walks through them).
func (r *PodSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, err := r.load(ctx, req.NamespacedName)
	if p == nil {
		return ctrl.Result{}, err
	}
	defer r.memory.passEnded(p.key)
	p.observe()
	p.plan()
	writeErr := p.write(ctx)
	p.computeStatus()
	statusErr := p.publish(ctx)
	p.record(ctx, statusErr)
	if statusErr != nil {
		return ctrl.Result{}, errors.Join(writeErr, statusErr)
	}
	return ctrl.Result{RequeueAfter: p.requeue()}, errors.Join(writeErr, stallError(p.outcome.Stall))
}

// deadlineExceeded reports whether a status shows the progress deadline
// passed.
func deadlineExceeded(status *podsetv1alpha1.PodSetStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, podsetv1alpha1.StalledCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == podsetv1alpha1.ProgressDeadlineExceededReason
}

// stallError makes a stall an error, so the controller retries with
// exponential backoff (the cause may go away without the PodSet changing,
// as when a namespace's Pod Security level is relaxed), or not at all for a
// template only a new spec can fix.
func stallError(s *podset.Stall) error {
	switch {
	case s == nil:
		return nil
	case s.Reason == podsetv1alpha1.InvalidTemplateReason:
		return reconcile.TerminalError(fmt.Errorf("%s: %s", s.Reason, s.Message))
	default:
		return fmt.Errorf("stalled, retrying with backoff: %s: %s", s.Reason, s.Message)
	}
}

// forget drops everything the operator keeps of a PodSet that is gone:
// its memory and its metric series.
func (r *PodSetReconciler) forget(key types.NamespacedName) {
	r.memory.forget(key)
	r.metrics.forget(key)
}

// keyOf is the expectations key of a PodSet.
func keyOf(ps *podsetv1alpha1.PodSet) types.NamespacedName {
	return types.NamespacedName{Namespace: ps.Namespace, Name: ps.Name}
}
