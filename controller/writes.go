package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// Every write the operator sends goes through the writer (writer.go),
// which holds the one field manager and ownership of every field it
// applies (ForceOwnership). Above it, the writes a pass counts go
// through send, sendPod, deletePod or, for the readiness gate's
// conditions, patchConditions (updates.go): a count by kind and outcome,
// and, for pods, the expectation that keeps a pass from acting on a cache
// that does not show the write yet. The writes of a ControllerRevision
// (syncRevisions) and the deletion of a PodDisruptionBudget are not
// counted. A pod apply names the pod's UID (an update of that pod only) or a createOnly
// resourceVersion (a create only); a delete carries the UID as a
// precondition.

// The kinds of writes that are not pod writes (see metrics.go for those).
const (
	// writeStatus is the apply of a PodSet's status.
	writeStatus = "status"
	// writeBudget is the apply of the PodDisruptionBudget of
	// spec.disruptionBudget; not counted.
	writeBudget = "budget"
)

// expectWrite is what a pod write leaves the operator expecting to see in
// its cache.
type expectWrite int

const (
	// expectNothing: a write the next one follows in the same pass (a
	// resize), or that changes nothing a pass decides on (a repair).
	expectNothing expectWrite = iota
	// expectCreated: a pod under the name, with the UID created.
	expectCreated
	// expectUpdated: the pod at the resourceVersion after this write.
	expectUpdated
	// expectGateOpened: the gate of a pod just created opened (openGate),
	// the pod at the resourceVersion after this write, if no pass since has
	// dropped what was expected of it.
	expectGateOpened
)

// send applies ac, to the object or to a subresource of it ("status",
// "resize"), as the operator's field manager, and counts it by kind.
func (r *PodSetReconciler) send(ctx context.Context, ps *podsetv1alpha1.PodSet, kind, subresource string, ac runtime.ApplyConfiguration) (resourceVersion string, err error) {
	resourceVersion, err = r.writes.apply(ctx, ac, subresource)
	switch kind {
	case writeStatus:
		r.metrics.countStatusWrite(ps, err)
	case writeBudget:
	default:
		r.metrics.countPodWrite(ps, kind, err)
	}
	return resourceVersion, err
}

// sendPod sends a pod apply to the pod, or to a subresource of it
// ("resize"), through the typed client (answered in protobuf), counts it
// by kind and, once it is through, leaves the pod's UID and new
// resourceVersion in ac, remembers what it expects the cache to show and
// returns the pod written.
func (r *PodSetReconciler) sendPod(ctx context.Context, ps *podsetv1alpha1.PodSet, kind, subresource string, ac *corev1ac.PodApplyConfiguration, expect expectWrite) (*corev1.Pod, error) {
	answer, err := r.writes.applyPod(ctx, ac, subresource)
	r.metrics.countPodWrite(ps, kind, err)
	if err != nil {
		return nil, err
	}
	ac.WithUID(answer.UID).WithResourceVersion(answer.ResourceVersion)
	name, uid, rv := ptr.Deref(ac.Name, ""), answer.UID, answer.ResourceVersion
	switch expect {
	case expectCreated:
		r.memory.expectCreated(keyOf(ps), name, uid)
	case expectUpdated:
		r.memory.expectUpdated(keyOf(ps), name, uid, rv)
	}
	return answer, nil
}

// deletePod deletes a pod with its UID as a precondition, so a newer pod of
// the same name is never deleted by mistake, counts it, and expects the
// cache to show the pod gone. opts add to the deletion (forceDelete).
func (r *PodSetReconciler) deletePod(ctx context.Context, ps *podsetv1alpha1.PodSet, pod *corev1.Pod, opts ...client.DeleteOption) error {
	err := r.writes.delete(ctx, pod, append([]client.DeleteOption{client.Preconditions{UID: &pod.UID}}, opts...)...)
	r.metrics.countPodWrite(ps, writeDelete, err)
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		r.memory.expectDeleted(keyOf(ps), pod.Name, pod.UID)
	}
	return err
}

// deleteBudget deletes the PodDisruptionBudget a PodSet controls and no
// longer wants, with its UID as a precondition, so one that someone else
// made under the name since is never deleted. NotFound and Conflict mean
// it is gone or not the one seen: nothing is left to do.
func (r *PodSetReconciler) deleteBudget(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	err := r.writes.delete(ctx, pdb, client.Preconditions{UID: &pdb.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// execute sends the plan's writes: deletions with UID preconditions (those
// of pods on lost nodes forced), then the rollout's writes, then
// creations in slow-start batches (so a template the API server refuses
// costs one request, not replicas of them), then repairs. It returns what
// the writes did, for the status, the events and the metrics (record),
// and the errors worth a retry.
func (r *PodSetReconciler) execute(ctx context.Context, ps *podsetv1alpha1.PodSet, plan *podset.Plan, revs *podset.Revisions, now metav1.Time) (podset.Outcome, error) {
	var errs []error
	var done podset.Outcome
	done.Pruned = r.deletePods(ctx, ps, plan.Prune, &errs)
	done.ReplacedFinished = r.deletePods(ctx, ps, plan.ReplaceFinished, &errs)
	done.ReplacedLost = r.replaceLost(ctx, ps, plan.ReplaceLost, &errs)

	// The rollout: pods recreated, pods whose containers restart in place
	// taken out of Ready first, pods updated where they run (a resize the
	// API server refuses recreates its pod), and gates opened again.
	done.Recreating(r.deletePods(ctx, ps, plan.Rollout, &errs), func(name string) string { return plan.Why[name] })
	updated, denied := r.updateInPlace(ctx, ps, plan.Update, revs, &errs)
	done.Updated = updated
	drain, deny := podset.ResizeDenied(denied)
	done.Recreating(r.deletePods(ctx, ps, deny, &errs), func(string) string { return podset.WhyResizeDenied })
	done.Restarting, done.Stopping = r.beginDrains(ctx, ps, append(plan.Drain, drain...), now, &errs)
	r.openGates(ctx, ps, plan.Resume, now, &errs)

	created, taken, err := r.createPods(ctx, ps, plan, revs, now)
	done.Created = created
	done.Conflicts = append(plan.Conflicts, taken...)
	if isRejection(err) {
		done.Rejection = rejection(err)
	} else if err != nil {
		errs = append(errs, err)
	}

	for _, pod := range plan.Repair {
		hash := pod.Labels[podsetv1alpha1.TemplateHashLabel]
		if err := r.applyExisting(ctx, ps, revs.Templates[hash], pod, hash); isRejection(err) {
			done.Rejection = rejection(err)
		} else if err != nil {
			errs = append(errs, err)
		} else {
			done.Repaired = append(done.Repaired, pod.Name)
		}
	}
	return done, errors.Join(errs...)
}

// createPods creates the pods of the plan's ordinals, each from its
// revision. Each create is an apply that can only create (see applyPod), so
// a pod that is not the PodSet's own is never taken over, with one request
// per pod and no window between a check and the write. It returns the pods
// created, the names held by pods the PodSet does not control, and the
// first error of the creates.
//
// A new pod's gate is opened beside the creates and outlives the pass
// (openGate): a slow-start batch waits for its creates only (they are what
// a refused template fails), and the pass ends once its creates are
// through, so the worker takes the next PodSet a round trip sooner: half
// the time of a one-pod PodSet's first pass.
func (r *PodSetReconciler) createPods(ctx context.Context, ps *podsetv1alpha1.PodSet, plan *podset.Plan, revs *podset.Revisions, now metav1.Time) (created, taken []string, err error) {
	var mu sync.Mutex
	err = slowStart(len(plan.Create), r.Workers, func(i int) error {
		ordinal := plan.Create[i]
		name := podset.PodName(ps.Name, ordinal)
		hash := plan.RevisionOf(ordinal, revs)
		tmpl := revs.Templates[hash]
		uid, err := r.createPod(ctx, ps, tmpl, ordinal, hash)
		switch {
		case err == nil:
			// Its gate opens at once: it is not being stopped. A pod
			// with a gate and no condition is not Ready.
			r.openGate(ctx, ps, name, uid, now)
			mu.Lock()
			created = append(created, name)
			mu.Unlock()
			return nil
		case !apierrors.IsConflict(err):
			return err
		}
		// The name is taken. Find out by whom: the API server, not the
		// cache, which holds only labelled pods.
		existing := &corev1.Pod{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: name}, existing); {
		case apierrors.IsNotFound(err):
			// Gone again since: the next pass creates it.
			return fmt.Errorf("pod %s was deleted while being created, retrying", name)
		case err != nil:
			return fmt.Errorf("checking who holds pod name %s: %w", name, err)
		case metav1.IsControlledBy(existing, ps):
			// Ours: the cache is behind and the pod's event is on its way,
			// or someone removed the label the cache selects on, so the
			// cache cannot see it: then restore it in place.
			if existing.Labels[podsetv1alpha1.NameLabel] != ps.Name {
				if h := existing.Labels[podsetv1alpha1.TemplateHashLabel]; revs.Known(h) {
					hash, tmpl = h, revs.Templates[h]
				}
				if err := r.applyExisting(ctx, ps, tmpl, existing, hash); err != nil {
					return err
				}
			}
			r.memory.expectCreated(keyOf(ps), name, existing.UID)
			return nil
		default:
			mu.Lock()
			taken = append(taken, name)
			mu.Unlock()
			return nil
		}
	})
	return created, taken, err
}

// createOnly is the resourceVersion of an apply that must create its pod:
// the API server treats a resourceVersion in an apply as a precondition,
// which no existing pod meets (the first revision of etcd is never a pod's),
// and ignores it when the apply creates the object. TestApplyPreconditions
// pins both halves of that on the real API server.
const createOnly = "1"

// createPod applies the desired pod of an ordinal, made from the template
// of the revision hash, and never as an upsert: the createOnly
// precondition makes it fail with a conflict if any pod holds the name.
// It returns the UID of the pod created.
func (r *PodSetReconciler) createPod(ctx context.Context, ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec, ordinal int, hash string) (types.UID, error) {
	pod, err := podset.PodFromTemplate(ps, tmpl, ordinal, hash)
	if err != nil {
		return "", err
	}
	pod.WithResourceVersion(createOnly)
	if _, err := r.sendPod(ctx, ps, writeCreate, "", pod, expectCreated); err != nil {
		return "", fmt.Errorf("applying pod %s: %w", *pod.Name, err)
	}
	return ptr.Deref(pod.UID, ""), nil
}

// applyExisting applies to an existing pod what the operator owns on it
// from the template of the revision hash, and nothing a running pod
// cannot change (podUpdate); its UID makes it an update of that pod only.
func (r *PodSetReconciler) applyExisting(ctx context.Context, ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec, pod *corev1.Pod, hash string) error {
	ac, err := podset.PodUpdate(ps, tmpl, pod, hash)
	if err != nil {
		return err
	}
	if _, err := r.sendPod(ctx, ps, writeRepair, "", ac, expectNothing); err != nil {
		return fmt.Errorf("applying pod %s: %w", pod.Name, err)
	}
	return nil
}

// syncRevisions writes the ControllerRevisions, as StatefulSet's
// controller does: the current template's is created if it is missing,
// or renumbered the newest if an older template came back (a merge patch
// of its revision number alone, on the resourceVersion the pass saw: the
// data of a revision is immutable to the byte, so it is never sent
// again); then it deletes the ones pruned, each with its UID as a
// precondition. If a new revision's name is taken, or the one to renumber
// changed, the cache has not shown the revision yet (its event brings the
// next pass) or someone else holds the name, and the pods do not need it
// either way.
func (r *PodSetReconciler) syncRevisions(ctx context.Context, plan podset.RevisionPlan, revs *podset.Revisions) error {
	if cr := plan.Write; cr != nil {
		if existing, ok := revs.Objects[revs.Update]; ok {
			renumbered := existing.DeepCopy()
			renumbered.Revision = cr.Revision
			if err := r.writes.patch(ctx, renumbered, client.MergeFromWithOptions(existing, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return fmt.Errorf("renumbering ControllerRevision %s: %w", cr.Name, err)
			}
		} else if err := r.writes.create(ctx, cr.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ControllerRevision %s: %w", cr.Name, err)
		}
	}
	for _, cr := range plan.Prune {
		if err := r.writes.delete(ctx, cr, client.Preconditions{UID: &cr.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting ControllerRevision %s: %w", cr.Name, err)
		}
	}
	return nil
}

// deletePods deletes pods in parallel, each with its UID as a precondition
// so a newer pod of the same name is never deleted by mistake, and returns
// the names of those deleted.
func (r *PodSetReconciler) deletePods(ctx context.Context, ps *podsetv1alpha1.PodSet, pods []*corev1.Pod, errs *[]error) []string {
	if len(pods) == 0 {
		return nil
	}
	var mu sync.Mutex
	var deleted []string
	err := parallel(len(pods), r.Workers, func(i int) error {
		pod := pods[i]
		if err := r.deletePod(ctx, ps, pod); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
		}
		mu.Lock()
		deleted = append(deleted, pod.Name)
		mu.Unlock()
		return nil
	})
	if err != nil {
		*errs = append(*errs, err)
	}
	return deleted
}

// isRejection reports whether the API server refused a write in a way that
// retrying the same request cannot fix: the pod is invalid, or admission
// (PodSecurity, a policy, a quota) forbids it.
func isRejection(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

// rejection is the API server's refusal err as an outcome: its reason, and
// its message, which names the pod and the field; it is stable from pass
// to pass, so status does not churn.
func rejection(err error) *podset.Rejection {
	message := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		message = status.Status().Message
	}
	return &podset.Rejection{Reason: string(apierrors.ReasonForError(err)), Message: message}
}

// slowStart calls fn for 0..n-1 in batches of 1, 2, 4, ... (each batch at
// most workers wide at a time), stopping at the first batch with an error.
// It is how the ReplicaSet controller keeps a failing create from being sent
// hundreds of times.
func slowStart(n, workers int, fn func(i int) error) error {
	for start, batch := 0, 1; start < n; start, batch = start+batch, batch*2 {
		size := min(batch, n-start)
		offset := start
		if err := parallel(size, workers, func(i int) error { return fn(offset + i) }); err != nil {
			return err
		}
	}
	return nil
}

// parallel calls fn for 0..n-1 with at most workers calls at a time and
// returns their errors joined.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, max(1, workers))
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
