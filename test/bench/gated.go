package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// gatedLimitContender is the gated limit of the in-place scenario: a plain
// client-go loop that sends, for each pod, the writes the operator sends
// for an update in place, with the same waits in between (controller/
// updates.go and writes.go):
//
//  1. close the gate: a strategic merge patch of pods/status with the pod's
//     UID that sets the podset.dev/InPlaceUpdateReady condition False and
//     Ready False with reason PodSetDraining (beginDrain);
//  2. wait for the kubelet's own not-Ready (Ready False with another
//     reason: kwok's stage), then the PodSet's spec.drainSeconds;
//  3. apply the pod of the new template (podset.PodUpdate, with the restart
//     record and the pod's resourceVersion, as updateInPlace sends it),
//     under the operator's field manager;
//  4. wait until its containers restarted (their restart count went up);
//  5. open the gate: an apply of pods/status with the condition True
//     (setGate).
//
// Each pod goes through these steps on its own goroutine, as the operator
// drains every pod at once with maxUnavailable 100%; at most w requests
// are in flight. It owns its pods with PodSets as the limit does (nothing
// reconciles them); it sets up as the apply loop of the limit does.
// kube-apiserver's CPU per pod under this loop is what an update in place
// behind a readiness gate costs on this cluster, whoever sends it: on
// kwok, where a pod's creation is free, the operator is measured against
// it rather than against the Deployment's recreation.
type gatedLimitContender struct {
	*limitContender
	// closes counts the gate-closing patches sent (pods/status PATCH),
	// retries included.
	closes atomic.Int64
}

func newGatedLimit(b *bench, w int) *gatedLimitContender {
	return &gatedLimitContender{limitContender: &limitContender{b: b, w: w}}
}

func (g *gatedLimitContender) name() string { return "gated-limit" }

// label is its name in the table.
func (g *gatedLimitContender) label() string {
	return "gated limit (the operator's writes and waits, W=" + strconv.Itoa(g.w) + ")"
}

// prepare makes the PodSets that own the pods, with the operator
// contender's update strategy (maxUnavailable 100%, InPlaceIfPossible).
func (g *gatedLimitContender) prepare(ctx context.Context, j job) error {
	return g.own(ctx, j, maxUnavailableOf(j))
}

// changeImage changes the owners' template (one request, as for the
// others), then updates every pod in place as the operator does.
func (g *gatedLimitContender) changeImage(ctx context.Context, j job) error {
	g.closes.Store(0)
	if err := g.retemplate(ctx, j, imageTemplate); err != nil {
		return err
	}
	items := podItems(j, 0, true)
	slots := make(chan struct{}, max(g.w, 1))
	send := func(f func() error) error {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-slots }()
		return f()
	}
	return parallel(len(items), len(items), func(i int) error {
		return g.updateInPlace(ctx, g.owner(j.ns, items[i].set), items[i].name(), send)
	})
}

// updateInPlace sends one pod's writes, and waits, as the operator does;
// send runs a request in one of the w slots.
func (g *gatedLimitContender) updateInPlace(ctx context.Context, ps *podsetv1alpha1.PodSet, name string, send func(func() error) error) error {
	pods := g.b.c.cs.CoreV1().Pods(ps.Namespace)
	key := ps.Namespace + "/" + name
	cached := func() (*corev1.Pod, error) {
		pod := &corev1.Pod{}
		err := g.b.obs.cache.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: name}, pod)
		return pod, err
	}
	wait := func(what string, cond func(p *podState) bool) error {
		return g.b.obs.waitFor(ctx, "pod "+name+" "+what, func(s *state) bool { p := s.pods[key]; return p != nil && cond(p) })
	}
	pod, err := cached()
	if err != nil {
		return err
	}
	hash := podset.TemplateHash(ps)

	// 1. Close the gate (beginDrain).
	if err := send(func() error { g.closes.Add(1); return closeGatePatch(ctx, pods, ps, pod, hash) }); err != nil {
		return fmt.Errorf("closing the gate of pod %s: %w", name, err)
	}

	// 2. The kubelet's own not-Ready, then the drain.
	if err := wait("not Ready by its kubelet", func(p *podState) bool {
		return !p.ready && p.readyReason != "" && p.readyReason != podsetv1alpha1.DrainingReason
	}); err != nil {
		return err
	}
	drain := time.Duration(deref(ps.Spec.DrainSeconds, podsetv1alpha1.DefaultDrainSeconds)) * time.Second
	select {
	case <-time.After(drain):
	case <-ctx.Done():
		return ctx.Err()
	}

	// 3. The apply of the new template (updateInPlace).
	pod, before, err := applyRestart(ctx, ps, hash, cached, func(ac *corev1ac.PodApplyConfiguration) error {
		return send(func() error {
			_, err := applyPod(ctx, pods, ac)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("updating pod %s in place: %w", name, err)
	}

	// 4. The containers restarted for the update.
	if err := wait("restarted", func(p *podState) bool { return p.restarts > before }); err != nil {
		return err
	}

	// 5. Open the gate (setGate).
	if err := send(func() error { return openGatePatch(ctx, pods, name, pod.UID) }); err != nil {
		return fmt.Errorf("opening the gate of pod %s: %w", name, err)
	}
	return nil
}

// closeGatePatch closes a pod's readiness gate for a restart in place as
// the operator does (controller's beginDrain): the gate and Ready False in
// one strategic merge patch of pods/status, with the pod's UID.
func closeGatePatch(ctx context.Context, pods typedcorev1.PodInterface, ps *podsetv1alpha1.PodSet, pod *corev1.Pod, hash string) error {
	now := metav1.Now()
	message := "its containers restart for revision " + podset.RevisionName(ps, hash) + " once the pod has drained"
	return patchConditions(ctx, pods, pod.Name, pod.UID, []corev1.PodCondition{
		{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionFalse, Reason: podsetv1alpha1.GateUpdatingReason, Message: message, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: podsetv1alpha1.DrainingReason, Message: "the operator took the pod out of Service endpoints: " + message, LastTransitionTime: now},
	})
}

// applyRestart sends, through apply, the apply of ps's template to the pod
// as cached shows it, with the restart record of the containers whose
// image changes and the pod's resourceVersion, as the operator's
// updateInPlace does; a conflict (the cache was behind) is retried. It
// returns the pod the apply was made from and its containers' restarts
// then.
func applyRestart(ctx context.Context, ps *podsetv1alpha1.PodSet, hash string, cached func() (*corev1.Pod, error), apply func(*corev1ac.PodApplyConfiguration) error) (*corev1.Pod, int32, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		pod, err := cached()
		if err != nil {
			return nil, 0, err
		}
		var restart []string
		for _, c := range pod.Spec.Containers {
			if i := slices.IndexFunc(ps.Spec.Template.Spec.Containers, func(t corev1.Container) bool { return t.Name == c.Name }); i >= 0 && ps.Spec.Template.Spec.Containers[i].Image != c.Image {
				restart = append(restart, c.Name)
			}
		}
		ac, err := podset.PodUpdate(ps, &ps.Spec.Template, pod, hash)
		if err != nil {
			return nil, 0, err
		}
		rec, err := podset.NewRestartRecord(pod, hash, restart)
		if err != nil {
			return nil, 0, err
		}
		ac.WithAnnotations(map[string]string{podset.RestartRecordAnnotation: rec}).WithResourceVersion(pod.ResourceVersion)
		switch err := apply(ac); {
		case apierrors.IsConflict(err):
			continue
		case err != nil:
			return nil, 0, err
		}
		var before int32
		for _, s := range pod.Status.ContainerStatuses {
			before += s.RestartCount
		}
		return pod, before, nil
	}
}

// openGatePatch opens a pod's readiness gate as the operator does
// (controller's setGate): a strategic merge patch of pods/status that sets
// its InPlaceUpdateReady condition True, every field sent, with the pod's
// UID as a precondition.
func openGatePatch(ctx context.Context, pods typedcorev1.PodInterface, name string, uid types.UID) error {
	return patchConditions(ctx, pods, name, uid, []map[string]any{{
		"type": podsetv1alpha1.InPlaceUpdateReadyCondition, "status": corev1.ConditionTrue,
		"reason": podsetv1alpha1.GateOpenReason, "message": "", "lastTransitionTime": metav1.Now(),
	}})
}

// patchConditions sends, as the operator does, a strategic
// merge patch of a pod's status with these conditions and its UID as a
// precondition.
func patchConditions(ctx context.Context, pods typedcorev1.PodInterface, name string, uid types.UID, conditions any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid}, "status": map[string]any{"conditions": conditions}})
	if err != nil {
		return err
	}
	_, err = pods.Patch(ctx, name, types.StrategicMergePatchType, patch, controller.WriteOptions(false), "status")
	return err
}
