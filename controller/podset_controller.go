package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	podsetac "github.com/podset-dev/podset-operator/applyconfig/apis/v1alpha1"
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
// created and updated by apply, pruned), and records events.
// test/reliability proves the operator uses every one of them.
//
// +kubebuilder:rbac:groups=podset.dev,resources=podsets,verbs=list;watch
// +kubebuilder:rbac:groups=podset.dev,resources=podsets/status,verbs=patch
// +kubebuilder:rbac:groups=podset.dev,resources=podsets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// PodSetReconciler keeps each PodSet's pods as its spec says.
type PodSetReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly. It is used only to find
	// out who holds a pod name that a create found taken.
	APIReader client.Reader
	// Recorder emits events through the events.k8s.io API.
	Recorder events.EventRecorder
	// Clock stamps condition transitions.
	Clock clock.PassiveClock
	// Workers bounds the pod writes one pass sends at once.
	Workers int

	expectations *expectations
	statusWrites *statusWrites
	held         *heldRevisions
	passTimes    *passTimes
}

var _ reconcile.Reconciler = (*PodSetReconciler)(nil)

// SetupWithManager registers the reconciler: PodSets by generation change,
// and pods they control by the changes that matter (podChanged), spaced by
// PodEventSpacing (podEvents).
func (r *PodSetReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Workers < 1 {
		r.Workers = DefaultWorkers
	}
	r.expectations = newExpectations(r.Clock.Now)
	r.statusWrites = newStatusWrites()
	r.held = newHeldRevisions()
	r.passTimes = newPassTimes(time.Now)
	nameLabel := func(o client.Object) []string { return []string{o.GetLabels()[podsetv1alpha1.NameLabel]} }
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, byPodSet, nameLabel); err != nil {
		return fmt.Errorf("indexing pods by PodSet: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &appsv1.ControllerRevision{}, byPodSet, nameLabel); err != nil {
		return fmt.Errorf("indexing ControllerRevisions by PodSet: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&podsetv1alpha1.PodSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, r.podEvents(), builder.WithPredicates(podChanged)).
		Owns(&appsv1.ControllerRevision{}).
		WithOptions(opts).
		Complete(r)
}

// Reconcile brings one PodSet's pods and status in line with its spec.
func (r *PodSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read the PodSet. Once it is gone, garbage collection removes its pods.
	ps := &podsetv1alpha1.PodSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ps); err != nil {
		if apierrors.IsNotFound(err) {
			r.expectations.forget(req.NamespacedName)
			r.statusWrites.forget(req.NamespacedName)
			r.held.forget(req.NamespacedName)
			r.passTimes.forget(req.NamespacedName)
			forgetMetrics(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ps.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	defer r.passTimes.ended(req.NamespacedName)
	began := r.Clock.Now()
	// The status clients see, even if the cache has not caught up with the
	// last status write yet.
	ps.Status = r.statusWrites.shown(req.NamespacedName, ps)

	// Read its pods and revisions from the cache, which holds only those
	// with the PodSet label.
	pods, history, err := r.childrenOf(ctx, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	revs := newRevisionSet(ps, history)
	r.held.observe(req.NamespacedName, ps, pods, revs.update)
	now := metav1.NewTime(r.Clock.Now()).Rfc3339Copy()

	// Keep the revisions, plan the pass and apply it, unless the template
	// is refused outright. The revisions are written beside the pods, not
	// before them: both plans come from the same snapshot, the pods are
	// made from templates the PodSet holds (never from a revision object),
	// and no revision a pod runs or may be recreated from is pruned, so a
	// new PodSet's first pass waits for one round trip less. A revision
	// write that fails is retried by the next pass, as before.
	var plan podPlan
	stalled := r.checkTemplate(ps)
	if stalled == nil {
		revPlan := planRevisions(ps, revs, pods, r.held.kept(req.NamespacedName))
		var revErr error
		var revWrites sync.WaitGroup
		revWrites.Go(func() { revErr = r.syncRevisions(ctx, ps, revPlan, revs) })
		plan = planPods(ps, pods, planInput{
			revs:       revs,
			remembered: r.held.remembered(req.NamespacedName),
			inFlight:   r.expectations.observe(req.NamespacedName, pods),
			now:        now.Time,
		})
		var execErr error
		stalled, execErr = r.execute(ctx, ps, &plan, revs, now)
		revWrites.Wait()
		err = errors.Join(revErr, execErr)
	}

	// Publish the status; a pass that changed nothing writes nothing.
	status := computeStatus(ps, pods, revs, &plan, stalled, now)
	wait, statusErr := r.applyStatus(ctx, ps, status)
	statusWait := wait
	defer func() { logPass(ctx, began, r.Clock.Now(), len(pods), &plan, ps.Status, status, statusWait, statusErr) }()
	if statusErr != nil {
		return ctrl.Result{}, errors.Join(err, statusErr)
	}
	if wait > 0 {
		// Deferred: clients still see the status they saw.
		observeStatus(ps, ps.Status, r.Clock.Now())
	} else {
		observeStatus(ps, status, r.Clock.Now())
	}
	if deadlineExceeded(&status) && !deadlineExceeded(&ps.Status) {
		c := meta.FindStatusCondition(status.Conditions, podsetv1alpha1.StalledCondition)
		r.Recorder.Eventf(ps, nil, corev1.EventTypeWarning, c.Reason, "Rollout", "%s", eventNote(c.Message))
	}

	// Look again when a write the cache has not shown expires, when a pod
	// becomes available, or when the progress deadline passes.
	for _, d := range []time.Duration{r.expectations.recheck(req.NamespacedName), wakeAfter(ps, pods, &status, now.Time), plan.wake} {
		if d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	return ctrl.Result{RequeueAfter: wait}, errors.Join(err, stallError(stalled))
}

// deadlineExceeded reports whether a status shows the progress deadline
// passed.
func deadlineExceeded(status *podsetv1alpha1.PodSetStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, podsetv1alpha1.StalledCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == podsetv1alpha1.ProgressDeadlineExceededReason
}

// childrenOf lists, from the cache, the pods and ControllerRevisions that
// carry the PodSet's name label, controlled by it or not. They are shared
// with the cache: read only.
func (r *PodSetReconciler) childrenOf(ctx context.Context, ps *podsetv1alpha1.PodSet) ([]corev1.Pod, []appsv1.ControllerRevision, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(ps.Namespace),
		client.MatchingFields{byPodSet: ps.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing the pods of PodSet %s: %w", ps.Name, err)
	}
	history := &appsv1.ControllerRevisionList{}
	if err := r.Client.List(ctx, history, client.InNamespace(ps.Namespace),
		client.MatchingFields{byPodSet: ps.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing the ControllerRevisions of PodSet %s: %w", ps.Name, err)
	}
	return pods.Items, history.Items, nil
}

// checkTemplate refuses a template that asks for less than the restricted
// profile. The admission policy refuses it first where it is installed.
func (r *PodSetReconciler) checkTemplate(ps *podsetv1alpha1.PodSet) *stall {
	violations := append(templateViolations(&ps.Spec.Template.Spec), reservedLabelViolations(ps.Spec.Template.Labels)...)
	if len(violations) == 0 {
		return nil
	}
	s := &stall{reason: podsetv1alpha1.InvalidTemplateReason, message: strings.Join(violations, "; ")}
	r.Recorder.Eventf(ps, nil, corev1.EventTypeWarning, s.reason, "Validate", "%s", eventNote(s.message))
	return s
}

// applyStatus writes the status with server-side apply, unless it is what
// clients already see (ps.Status, as statusWrites.shown tells it). Progress
// (counts, pod names, Reconciling) is written at most once per
// StatusInterval, so a scale-up of a thousand pods does not cost a thousand
// status writes; it returns how long to wait before the deferred write. A
// change of Ready or Stalled is written at once: that is what kubectl wait,
// Argo CD and Flux act on (significantChange).
func (r *PodSetReconciler) applyStatus(ctx context.Context, ps *podsetv1alpha1.PodSet, status podsetv1alpha1.PodSetStatus) (time.Duration, error) {
	if equality.Semantic.DeepEqual(status, ps.Status) {
		return 0, nil
	}
	key := keyOf(ps)
	if !significantChange(ps.Status, status) {
		if wait := r.statusWrites.wait(key, r.Clock.Now()); wait > 0 {
			return wait, nil
		}
	}
	ac := &podsetac.PodSetStatusApplyConfiguration{}
	if err := convert(status, ac); err != nil {
		return 0, fmt.Errorf("converting the status of PodSet %s: %w", ps.Name, err)
	}
	apply := podsetac.PodSet(ps.Name, ps.Namespace).WithStatus(ac)
	err := r.Client.Status().Apply(ctx, apply, client.FieldOwner(FieldManager), client.ForceOwnership)
	countStatusWrite(ps, err)
	if err != nil {
		return 0, fmt.Errorf("applying the status of PodSet %s: %w", ps.Name, err)
	}
	// The answer is the PodSet after the write: its resourceVersion tells
	// when the cache has caught up.
	r.statusWrites.wrote(key, r.Clock.Now(), ptr.Deref(apply.ResourceVersion, ""), status)
	return 0, nil
}

// stallError makes a stall an error, so the controller retries with
// exponential backoff (the cause may go away without the PodSet changing,
// as when a namespace's Pod Security level is relaxed), or not at all for a
// template only a new spec can fix.
func stallError(s *stall) error {
	switch {
	case s == nil:
		return nil
	case s.reason == podsetv1alpha1.InvalidTemplateReason:
		return reconcile.TerminalError(fmt.Errorf("%s: %s", s.reason, s.message))
	default:
		return fmt.Errorf("stalled, retrying with backoff: %s: %s", s.reason, s.message)
	}
}

// keyOf is the expectations key of a PodSet.
func keyOf(ps *podsetv1alpha1.PodSet) types.NamespacedName {
	return types.NamespacedName{Namespace: ps.Namespace, Name: ps.Name}
}

// logPass logs, at debug level (--log-level debug), what one pass did and
// how long it took: the pass timeline of a PodSet, as the benchmark traces
// it.
func logPass(ctx context.Context, began, ended time.Time, pods int, plan *podPlan, shown, status podsetv1alpha1.PodSetStatus, deferred time.Duration, statusErr error) {
	log := ctrl.LoggerFrom(ctx).V(1)
	if !log.Enabled() {
		return
	}
	outcome := "unchanged"
	switch {
	case statusErr != nil:
		outcome = "failed"
	case deferred > 0:
		outcome = "deferred"
	case !equality.Semantic.DeepEqual(shown, status):
		outcome = "written"
	}
	log.Info("pass", "began", began.UTC().Format(time.RFC3339Nano), "took", ended.Sub(began).String(), "pods", pods,
		"create", len(plan.create), "delete", len(plan.prune)+len(plan.rollout), "update", len(plan.update),
		"repair", len(plan.repair), "gates", len(plan.pause)+len(plan.resume), "status", outcome,
		"ready", status.ReadyReplicas)
}
