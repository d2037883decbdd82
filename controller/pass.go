package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	podsetac "github.com/podset-dev/podset-operator/applyconfig/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// pass is one Reconcile of one PodSet: what it read, what it decided and
// what it wrote, phase by phase. Each phase is a method; Reconcile calls
// them in order.
type pass struct {
	r   *PodSetReconciler
	key types.NamespacedName
	// began is the pass's one clock (the View's Now): every decision is
	// measured against it.
	began time.Time
	// now is began as the pass's writes record it (the pods' gate
	// conditions): in whole seconds, as the API server stores times.
	now metav1.Time

	// load
	ps      *podsetv1alpha1.PodSet
	pods    []corev1.Pod
	history []appsv1.ControllerRevision
	budget  *policyv1.PodDisruptionBudget
	nodes   podset.Nodes

	// observe
	view   *podset.View
	held   podset.Held
	drains podset.Drains
	// endpoints is what the EndpointSlices say of the pods.
	endpoints podset.Endpoints
	inFlight  func(name string) bool

	// plan
	podPlan    podset.Plan
	revPlan    podset.RevisionPlan
	budgetPlan podset.BudgetPlan

	// write: what the writes did, and what stalls the PodSet (a template
	// refused in plan, the pods' or the PodDisruptionBudget's stall).
	outcome podset.Outcome

	// computeStatus and publish: the status this pass wants clients to
	// see, and how long its write is deferred (0: written, or nothing to
	// write).
	status   podsetv1alpha1.PodSetStatus
	deferred time.Duration
}

// load reads the PodSet, and its pods, revisions and PodDisruptionBudget
// from the cache, which holds only those with the PodSet label
// (controlled by it or not; shared with the cache: read only), and, with
// spec.lostNodeReplacement, what it needs of their nodes. It returns nil
// when there is nothing to do:
// the PodSet is gone (then its memory is dropped and garbage collection
// removes its pods) or being deleted.
func (r *PodSetReconciler) load(ctx context.Context, key types.NamespacedName) (*pass, error) {
	ps := &podsetv1alpha1.PodSet{}
	if err := r.Client.Get(ctx, key, ps); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
		}
		return nil, client.IgnoreNotFound(err)
	}
	if ps.DeletionTimestamp != nil {
		return nil, nil
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(ps.Namespace),
		client.MatchingFields{byPodSet: ps.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the pods of PodSet %s: %w", ps.Name, err)
	}
	history := &appsv1.ControllerRevisionList{}
	if err := r.Client.List(ctx, history, client.InNamespace(ps.Namespace),
		client.MatchingFields{byPodSet: ps.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the ControllerRevisions of PodSet %s: %w", ps.Name, err)
	}
	budget, err := r.loadBudget(ctx, ps)
	if err != nil {
		return nil, err
	}
	nodes, err := r.lostNodes(ctx, ps, pods.Items)
	if err != nil {
		return nil, err
	}
	began := r.Clock.Now()
	return &pass{
		r: r, key: key, began: began, now: metav1.NewTime(began).Rfc3339Copy(),
		ps: ps, pods: pods.Items, history: history.Items, budget: budget, nodes: nodes,
	}, nil
}

// observe joins what the cache shows with what the operator remembers of
// the PodSet: the status clients see (the cache may not show the last
// status write yet), the pod writes still in flight, what the pods the
// partition holds back ran, and since when pods drain.
func (p *pass) observe() {
	m := p.r.memory
	m.begin(p.ps)
	p.ps.Status = m.shownStatus(p.key, p.ps)
	p.view = podset.NewView(p.ps, podset.NewRevisions(p.ps, p.history), p.pods, p.began)
	p.view.Nodes = p.nodes
	p.held = m.observeHeld(p.key, p.view)
	p.drains = m.observeDrains(p.key, p.view, p.began)
	uids := make([]types.UID, len(p.pods))
	for i := range p.pods {
		uids[i] = p.pods[i].UID
	}
	p.endpoints = p.r.endpoints.state(uids)
	p.inFlight = m.inFlight(p.key, p.pods)
}

// plan decides the pass's writes with the pure core: the revisions to keep,
// the pods to create, update and delete, and the PodDisruptionBudget to
// apply or delete, unless the template is
// refused outright (the admission policy refuses it first where it is
// installed).
func (p *pass) plan() {
	violations := append(podset.TemplateViolations(&p.ps.Spec.Template.Spec), podset.ReservedLabelViolations(p.ps.Spec.Template.Labels)...)
	if len(violations) > 0 {
		p.outcome.Stall = &podset.Stall{Reason: podsetv1alpha1.InvalidTemplateReason, Message: strings.Join(violations, "; ")}
		return
	}
	p.revPlan = p.view.PlanRevisions(p.held.Kept())
	p.podPlan = p.view.Plan(podset.Input{Held: p.held, InFlight: p.inFlight, Drains: p.drains, Endpoints: p.endpoints})
	p.budgetPlan = podset.PlanBudget(p.ps, p.budget)
}

// write sends the plan. The revisions are written beside the pods, not
// before them: both plans come from the same snapshot, the pods are made
// from templates the PodSet holds (never from a revision object), and no
// revision a pod runs or may be recreated from is pruned, so a new PodSet's
// first pass waits for one round trip less. A write that fails is retried
// by the next pass. What the writes did is the pass's outcome.
func (p *pass) write(ctx context.Context) error {
	if p.outcome.Stall != nil {
		return nil
	}
	var revErr error
	var revWrites sync.WaitGroup
	revWrites.Go(func() { revErr = p.r.syncRevisions(ctx, p.revPlan, p.view.Revs) })
	done, err := p.r.execute(ctx, p.ps, &p.podPlan, p.view.Revs, p.now)
	// The PodDisruptionBudget after the pods: a pod's stall says more.
	budgetStalled, budgetErr := p.r.syncBudget(ctx, p.ps, p.budgetPlan, &done)
	revWrites.Wait()
	done.Stall = cmp.Or(done.PodStall(), budgetStalled)
	p.outcome = done
	return errors.Join(revErr, err, budgetErr)
}

// computeStatus is the status the pass wants clients to see, from the
// view, the plan and the outcome.
func (p *pass) computeStatus() {
	p.status = p.view.Status(&p.podPlan, &p.outcome)
}

// publish writes the status with server-side apply, unless it is what
// clients already see (a pass that changed nothing writes nothing).
// Progress (counts, pod names, Reconciling) is written at most once per
// StatusInterval, so a scale-up of a thousand pods does not cost a thousand
// status writes; the write is then deferred. A change of Ready or Stalled
// is written at once: that is what kubectl wait, Argo CD and Flux act on
// (podset.SignificantChange).
func (p *pass) publish(ctx context.Context) error {
	if equality.Semantic.DeepEqual(p.status, p.ps.Status) {
		return nil
	}
	if !podset.SignificantChange(p.ps.Status, p.status) {
		if p.deferred = p.r.memory.statusWait(p.key); p.deferred > 0 {
			return nil
		}
	}
	ac := &podsetac.PodSetStatusApplyConfiguration{}
	if err := podset.Convert(p.status, ac); err != nil {
		return fmt.Errorf("converting the status of PodSet %s: %w", p.ps.Name, err)
	}
	apply := podsetac.PodSet(p.ps.Name, p.ps.Namespace).WithStatus(ac)
	rv, err := p.r.send(ctx, p.ps, writeStatus, "status", apply)
	if err != nil {
		return fmt.Errorf("applying the status of PodSet %s: %w", p.ps.Name, err)
	}
	// The PodSet's resourceVersion after the write tells when the cache
	// has caught up.
	p.r.memory.wroteStatus(p.key, rv, p.status)
	return nil
}

// record leaves the pass's traces, all from its plan, its outcome and its
// status: the pass in the debug log, its events (passEvents) sent through
// the writer, and in the metrics the pods replaced on lost nodes, the
// status clients now see and the rollout's duration.
func (p *pass) record(ctx context.Context, statusErr error) {
	p.logPass(ctx, statusErr)
	for _, e := range passEvents(p.ps, &p.podPlan, &p.outcome, p.view.Revs, &p.ps.Status, &p.status, statusErr) {
		p.r.writes.event(p.ps, e)
	}
	if n := len(p.outcome.ReplacedLost); n > 0 {
		p.r.metrics.lostNodeReplacements.WithLabelValues(p.ps.Namespace, p.ps.Name).Add(float64(n))
	}
	if statusErr != nil {
		return
	}
	shown := p.status
	if p.deferred > 0 {
		shown = p.ps.Status // clients still see the status they saw
	}
	if started, done := p.r.memory.rolloutEnded(p.ps, shown); done {
		p.r.metrics.rolloutDuration.WithLabelValues(p.ps.Namespace, p.ps.Name).Observe(p.r.Clock.Since(started).Seconds())
	}
}

// requeue is when to look again although no event may come: when the
// deferred status write is due, when a write the cache has not shown
// expires, when a pod becomes available, when the progress deadline
// passes, or when something the plan waits for is due. 0: on events only.
func (p *pass) requeue() time.Duration {
	wait := p.deferred
	for _, d := range []time.Duration{p.r.memory.recheck(p.key), p.view.WakeAfter(&p.status), p.podPlan.Wake} {
		if d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	return wait
}

// logPass logs, at debug level (--log-level debug), what one pass did and
// how long it took: the pass timeline of a PodSet, as the benchmark traces
// it.
func (p *pass) logPass(ctx context.Context, statusErr error) {
	log := ctrl.LoggerFrom(ctx).V(1)
	if !log.Enabled() {
		return
	}
	outcome := "unchanged"
	switch {
	case statusErr != nil:
		outcome = "failed"
	case p.deferred > 0:
		outcome = "deferred"
	case !equality.Semantic.DeepEqual(p.ps.Status, p.status):
		outcome = "written"
	}
	plan := &p.podPlan
	log.Info("pass", "began", p.began.UTC().Format(time.RFC3339Nano), "took", p.r.Clock.Since(p.began).String(), "pods", len(p.pods),
		"create", len(plan.Create), "delete", len(plan.Prune)+len(plan.Rollout), "update", len(plan.Update),
		"repair", len(plan.Repair), "gates", len(plan.Drain)+len(plan.Resume), "status", outcome,
		"ready", p.status.ReadyReplicas)
}
