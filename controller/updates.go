package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// The writes of in-place updates: the readiness gate through pods/status
// (a strategic merge patch, patchConditions), cpu and memory through
// pods/resize, and the rest with an apply to the pod that sends nothing a
// running pod cannot change (podUpdate). Each carries the operator's
// field manager and the pod's UID.

// setGate opens the pod's gate: its InPlaceUpdateReady condition True
// (podset.OpenGateCondition), written by patchConditions; expect is what
// the write leaves the pass expecting.
func (r *PodSetReconciler) setGate(ctx context.Context, ps *podsetv1alpha1.PodSet, pod *corev1.Pod, now metav1.Time, expect expectWrite) error {
	if err := r.patchConditions(ctx, ps, pod, []corev1.PodCondition{podset.OpenGateCondition(now)}, expect); err != nil {
		return fmt.Errorf("setting the %s condition of pod %s: %w", podsetv1alpha1.InPlaceUpdateReadyCondition, pod.Name, err)
	}
	return nil
}

// beginDrain begins a pod's drain (podset's gate.go): one write to its
// status sets the conditions podset.DrainConditions says.
func (r *PodSetReconciler) beginDrain(ctx context.Context, ps *podsetv1alpha1.PodSet, step podset.Step, now metav1.Time) error {
	if err := r.patchConditions(ctx, ps, step.Pod, podset.DrainConditions(ps, step, now), expectUpdated); err != nil {
		return fmt.Errorf("closing the %s gate of pod %s: %w", podsetv1alpha1.InPlaceUpdateReadyCondition, step.Pod.Name, err)
	}
	return nil
}

// conditionPatch is a pod condition in a strategic merge patch of
// pods/status: every field is sent, an empty one too, so that a message
// or reason the last write set does not outlive this one.
type conditionPatch struct {
	Type               corev1.PodConditionType `json:"type"`
	Status             corev1.ConditionStatus  `json:"status"`
	Reason             string                  `json:"reason"`
	Message            string                  `json:"message"`
	LastTransitionTime metav1.Time             `json:"lastTransitionTime"`
}

// patchConditions writes the gate's conditions of a pod, counted as a
// gate write, and remembers what expect says of the pod at the version
// written.
//
// It is a strategic merge patch of pods/status, which merges conditions
// by type, as the kubelet's own status writes are, not a server-side
// apply:
//   - the Ready condition the drain sets is the kubelet's, and an apply
//     would keep owning it, so that the next apply of the gate (without
//     it) would remove what the kubelet no longer writes; a patch is an
//     update, which owns only what it changed, until the kubelet changes
//     it again;
//   - the gate's condition is written by the operator alone, so an apply's
//     ownership guards nothing a patch loses, and the API server computes
//     a patch for a fraction of an apply's CPU (docs/benchmarks.md): one
//     gate opens for every pod created.
//
// The pod's UID in the patch makes it a write to that pod only (the API
// server refuses to change a UID).
func (r *PodSetReconciler) patchConditions(ctx context.Context, ps *podsetv1alpha1.PodSet, pod *corev1.Pod, conditions []corev1.PodCondition, expect expectWrite) error {
	cs := make([]conditionPatch, len(conditions))
	for i, c := range conditions {
		cs[i] = conditionPatch{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": cs},
	})
	if err != nil {
		return err
	}
	answer, err := r.writes.patchPodStatus(ctx, pod.Namespace, pod.Name, patch)
	r.metrics.countPodWrite(ps, writeGate, err)
	if err != nil {
		return err
	}
	switch expect {
	case expectUpdated:
		r.memory.expectUpdated(keyOf(ps), pod.Name, answer.UID, answer.ResourceVersion)
	case expectGateOpened:
		r.memory.gateOpened(keyOf(ps), pod.Name, answer.UID, answer.ResourceVersion)
	}
	return nil
}

// openGate opens the readiness gate of a pod just created, in the
// background: the pass that created it does not wait. Until the apply is
// through, the memory holds the pod in flight (expectGateOpening), so a
// pass that starts meanwhile neither opens the gate again nor acts on the
// pod; once it is, the pod is expected at the version written, as after
// any write. An apply that fails leaves the pod to the next pass, which
// opens its gate (Plan.Resume): the pass that created it asks to look
// again within createTTL (memory.recheck), whatever events come. At most
// Workers gates open at once over all passes; a pass waits for a slot.
func (r *PodSetReconciler) openGate(ctx context.Context, ps *podsetv1alpha1.PodSet, name string, uid types.UID, now metav1.Time) {
	key := keyOf(ps)
	r.memory.expectGateOpening(key, name, uid)
	r.gateSlots <- struct{}{}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer func() { <-r.gateSlots }()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ps.Namespace, UID: uid}}
		err := r.setGate(ctx, ps, pod, now, expectGateOpened)
		if err != nil {
			r.memory.gateNotOpened(key, name, uid)
			if !apierrors.IsNotFound(err) {
				ctrl.LoggerFrom(ctx).Error(err, "opening the readiness gate of a new pod; the next pass retries", "pod", name)
			}
		}
	}()
}

// openGates opens the readiness gates of pods, in parallel.
func (r *PodSetReconciler) openGates(ctx context.Context, ps *podsetv1alpha1.PodSet, pods []*corev1.Pod, now metav1.Time, errs *[]error) {
	err := parallel(len(pods), r.Workers, func(i int) error {
		err := r.setGate(ctx, ps, pods[i], now, expectUpdated)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	})
	if err != nil {
		*errs = append(*errs, err)
	}
}

// beginDrains begins the drains of pods, in parallel, and returns the pods
// whose gates it closed: to restart them in place, and to delete them,
// by why.
func (r *PodSetReconciler) beginDrains(ctx context.Context, ps *podsetv1alpha1.PodSet, steps []podset.Step, now metav1.Time, errs *[]error) (restart []string, stop map[string][]string) {
	var mu sync.Mutex
	stop = map[string][]string{}
	err := parallel(len(steps), r.Workers, func(i int) error {
		err := r.beginDrain(ctx, ps, steps[i], now)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err):
			// Gone, or another pod of the name (its UID differs): the
			// next pass sees it.
			return nil
		case err != nil:
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if s := steps[i]; s.Way.InPlace {
			restart = append(restart, s.Pod.Name)
		} else {
			stop[s.Way.Why] = append(stop[s.Way.Why], s.Pod.Name)
		}
		return nil
	})
	if err != nil {
		*errs = append(*errs, err)
	}
	return restart, stop
}

// updateInPlace brings pods to the current revision where they run: first
// a resize where cpu or memory change (a resize the API server refuses
// recreates the pod instead), then the apply of the pod's metadata and
// images. It returns the pods updated, by what changed, and the steps whose
// resize the API server refused.
func (r *PodSetReconciler) updateInPlace(ctx context.Context, ps *podsetv1alpha1.PodSet, steps []podset.Step, revs *podset.Revisions, errs *[]error) (updated map[string][]string, denied []podset.Step) {
	var mu sync.Mutex
	updated = map[string][]string{}
	tmpl := revs.Templates[revs.Update]
	err := parallel(len(steps), r.Workers, func(i int) error {
		step := steps[i]
		pod := step.Pod
		if from := revs.Templates[pod.Labels[podsetv1alpha1.TemplateHashLabel]]; step.Way.Resize && from != nil {
			resized, err := r.resize(ctx, ps, from, tmpl, pod)
			switch {
			case isRejection(err):
				mu.Lock()
				denied = append(denied, step)
				mu.Unlock()
				return nil
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				return nil
			case err != nil:
				return err
			}
			pod = resized
		}
		ac, err := podset.PodUpdate(ps, tmpl, pod, revs.Update)
		if err != nil {
			return err
		}
		if step.Way.Restart() {
			// The restart counts the containers have now tell when they
			// restarted for this update (restarted). The pod's
			// resourceVersion makes sure they are the pod's latest: an
			// apply after a restart the cache had not shown yet fails
			// with a conflict, and the next pass records it again.
			rec, err := podset.NewRestartRecord(pod, revs.Update, step.Way.Restarts)
			if err != nil {
				return err
			}
			ac.WithAnnotations(map[string]string{podset.RestartRecordAnnotation: rec})
			if !step.Way.Resize {
				ac.WithResourceVersion(pod.ResourceVersion)
			}
		}
		_, err = r.sendPod(ctx, ps, writeUpdateInPlace, "", ac, expectUpdated)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("updating pod %s in place: %w", pod.Name, err)
		}
		mu.Lock()
		what := step.Way.Describe()
		updated[what] = append(updated[what], pod.Name)
		mu.Unlock()
		return nil
	})
	if err != nil {
		*errs = append(*errs, err)
	}
	return updated, denied
}

// resize applies to a pod's resize subresource the cpu and memory the
// change of template from from to to asks for, and returns the pod with
// the resources it now has. A resize an earlier pass sent already (the
// apply to the pod did not follow) has nothing left to send.
func (r *PodSetReconciler) resize(ctx context.Context, ps *podsetv1alpha1.PodSet, from, to *corev1.PodTemplateSpec, pod *corev1.Pod) (*corev1.Pod, error) {
	resize := podset.PodResize(ps, from, to, pod)
	if resize == nil {
		return pod, nil
	}
	answer, err := r.sendPod(ctx, ps, writeUpdateInPlace, "resize", resize, expectNothing)
	if err != nil {
		return nil, fmt.Errorf("resizing pod %s: %w", pod.Name, err)
	}
	// The apply that follows keeps the resources the pod now has.
	pod = pod.DeepCopy()
	for _, c := range answer.Spec.Containers {
		keepResized(pod.Spec.Containers, c)
	}
	for _, c := range answer.Spec.InitContainers {
		keepResized(pod.Spec.InitContainers, c)
	}
	return pod, nil
}

// keepResized sets the resources of the container of c's name to c's, as
// the answer to a resize has them.
func keepResized(containers []corev1.Container, c corev1.Container) {
	if i := slices.IndexFunc(containers, func(have corev1.Container) bool { return have.Name == c.Name }); i >= 0 {
		containers[i].Resources.Requests = c.Resources.Requests
		containers[i].Resources.Limits = c.Resources.Limits
	}
}
