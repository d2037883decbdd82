package podset

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// What the gate protocol (gate.go) reads and writes on a pod: the gate's
// condition, Ready, the restart record, and the conditions each step
// writes.

// hasGate reports whether a pod carries the operator's readiness gate.
// Gates are immutable: only pods made with it can be taken out of
// endpoints by the operator.
func hasGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool {
		return g.ConditionType == podsetv1alpha1.InPlaceUpdateReadyCondition
	})
}

// gateCondition is the pod's InPlaceUpdateReady condition, or nil.
func gateCondition(pod *corev1.Pod) *corev1.PodCondition {
	return podCondition(pod, podsetv1alpha1.InPlaceUpdateReadyCondition)
}

// gateClosed reports whether the operator took the pod out of Ready to
// stop its containers, and has not let it back.
func gateClosed(pod *corev1.Pod) bool {
	c := gateCondition(pod)
	return c != nil && c.Status == corev1.ConditionFalse
}

// gateOpen reports whether the pod's InPlaceUpdateReady condition is True.
func gateOpen(pod *corev1.Pod) bool {
	c := gateCondition(pod)
	return c != nil && c.Status == corev1.ConditionTrue
}

// restartRecord is what the operator writes on a pod, in the annotation
// restartRecordAnnotation, with the apply that restarts its containers in
// place: the revision it moves the pod to, and the restart count of each
// container that restarts for it, as the pod's status showed them just
// before. A kubelet counts every new container of a name as a restart,
// whatever made it start, so a container has restarted for the update
// once its count is above the one recorded. Neither the image a runtime
// reports (containerd reports the first of all the tags that name the
// same image, or its config digest for an image pulled by digest) nor the
// image ID (the same for a new tag of the same image) can tell that.
type restartRecord struct {
	Revision      string           `json:"revision"`
	RestartCounts map[string]int32 `json:"restartCounts"`
}

// NewRestartRecord is the record of an update of pod to revision that
// restarts the containers named.
func NewRestartRecord(pod *corev1.Pod, revision string, containers []string) (string, error) {
	rec := restartRecord{Revision: revision, RestartCounts: map[string]int32{}}
	for _, name := range containers {
		var count int32
		for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
			if i := slices.IndexFunc(list, func(s corev1.ContainerStatus) bool { return s.Name == name }); i >= 0 {
				count = list[i].RestartCount
			}
		}
		rec.RestartCounts[name] = count
	}
	b, err := json.Marshal(rec)
	return string(b), err
}

// podRestartRecord is the pod's restart record for the revision it is
// labelled with, if it has one.
func podRestartRecord(pod *corev1.Pod) (restartRecord, bool) {
	var rec restartRecord
	v, ok := pod.Annotations[RestartRecordAnnotation]
	if !ok || json.Unmarshal([]byte(v), &rec) != nil || rec.Revision != pod.Labels[podsetv1alpha1.TemplateHashLabel] {
		return restartRecord{}, false
	}
	return rec, true
}

// restarted reports whether the containers of a pod whose gate is closed
// have restarted for the revision it is labelled with, so that the gate
// may open: each container the pod's restart record names has restarted
// since the update was applied, and every other container and sidecar
// runs. A restarted container need not run yet: its restart count went
// up, so the container that served before the update is gone, and the new
// one makes the pod Ready only once it is ready itself. Opening the gate
// then, rather than once it runs, lets a kubelet report the pod Ready in
// the same status update as its container, instead of one round trip
// later.
//
// A pod without a record for its revision had nothing restarted for it:
// it was made from that revision, or last updated to it in place, and its
// gate closed for a stop that did not happen (the template went back to
// its revision before its images were applied, or a scale-down was undone
// before the pod was deleted). Its containers run what its revision
// names, so the gate opens once they run. Images are never compared: a
// runtime reports the first of the tags naming the same image, or a
// digest, not what the spec says.
func restarted(pod *corev1.Pod) bool {
	rec, _ := podRestartRecord(pod)
	return everyRunningContainer(pod, func(c *corev1.Container, s *corev1.ContainerStatus) bool {
		if s == nil {
			return false
		}
		if before, restarts := rec.RestartCounts[c.Name]; restarts {
			return s.RestartCount > before
		}
		return s.State.Running != nil
	})
}

// podReady reports whether a pod is running and its Ready condition is
// True, and the operator has not closed its readiness gate: from then on
// the pod is on its way out of Ready, whatever the kubelet said last.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || gateClosed(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// GateOpens reports whether a pass opens the gate of a pod kept on its
// revision: the pod carries the gate and it was never set (a new pod), or
// it is closed and the containers restarted for the pod's revision (or
// the stop it closed for is no longer wanted) with its resize carried out.
func GateOpens(pod *corev1.Pod) bool {
	g := gateCondition(pod)
	return hasGate(pod) && (g == nil || g.Status != corev1.ConditionTrue && restarted(pod) && resizeSettled(pod))
}

// OpenGateCondition is the InPlaceUpdateReady condition that opens a pod's
// gate, set at now. Its message is empty: the write that closed the gate
// set one.
func OpenGateCondition(now metav1.Time) corev1.PodCondition {
	return corev1.PodCondition{
		Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue,
		Reason: podsetv1alpha1.GateOpenReason, LastTransitionTime: now,
	}
}

// DrainConditions are the conditions the write that begins a pod's
// drain sets, at now: its InPlaceUpdateReady condition False, and its
// Ready condition False with DrainingReason, so the EndpointSlice
// controller drops the pod at once rather than once the kubelet has seen
// the gate. The reason says what follows the drain: a restart in place
// for the PodSet's current revision, or the deletion step.Way.Why says.
//
// For a restart in place whose hooks hold the drain, the Ready
// condition's message is the one the kubelet expects of the pod with its
// gate closed (kubeletReadyMessage), so that the kubelet, which syncs a
// pod at once when its Ready condition's status or message is not what
// it expects (NeedToReconcilePodReadiness), does not sync it for the
// gate: the new images, applied a moment later, find the kubelet idle
// and are synced at once, by the sync that reports the pod not Ready
// and runs the hooks. Had it synced for the gate, it would sync the
// images only after its next relist of the containers (up to a second:
// its pod worker waits for a relist newer than its last sync).
func DrainConditions(ps *podsetv1alpha1.PodSet, step Step, now metav1.Time) []corev1.PodCondition {
	reason := podsetv1alpha1.GateStoppingReason
	message := "the pod is deleted once it has drained: " + step.Way.Why
	if step.Way.InPlace {
		reason = podsetv1alpha1.GateUpdatingReason
		message = "its containers restart for revision " + RevisionName(ps, TemplateHash(ps)) + " once the pod has drained"
	}
	ready := "the operator took the pod out of Service endpoints: " + message
	if step.Way.InPlace && stopsWithPreStop(ps, step.Pod, step.Way) {
		ready = kubeletReadyMessage(step.Pod)
	}
	return []corev1.PodCondition{
		{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionFalse, Reason: reason, Message: message, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: podsetv1alpha1.DrainingReason, Message: ready, LastTransitionTime: now},
	}
}

// kubeletGateMessage is the message of the Ready condition a kubelet
// writes for a Ready pod whose only unmet readiness gate is the
// operator's, closed (GeneratePodReadyCondition in the kubelet's
// pkg/kubelet/status/generate.go, Kubernetes 1.37).
var kubeletGateMessage = fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", podsetv1alpha1.InPlaceUpdateReadyCondition, corev1.ConditionFalse)

// kubeletReadyMessage is the message the kubelet's check of a pod's Ready
// condition (NeedToReconcilePodReadiness, Kubernetes 1.37) expects of a
// Ready pod, the only kind whose gate closes, once the operator's gate is
// closed: GeneratePodReadyCondition over the pod's status as the API
// server holds it, in which every container is ready and every other
// readiness gate True (the pod is Ready), so that the only unmet gate is
// the operator's (kubeletGateMessage).
//
// But the check reads status.containerStatuses only, while the kubelet's
// sync computes Ready from every container's status, the native
// sidecars' (status.initContainerStatuses) included. So for a pod with a
// native sidecar the check expects "containers with unknown status:
// [<the sidecars>]", whatever the sidecars' state, and it is this
// message, not the one its sync writes, that spares the pod a sync. It
// stands for a moment only: the sync of the new images, which follows at
// once, writes the kubelet's own Ready condition. A kubelet whose check
// reads every status would sync the pod for the gate, and the restart
// would wait up to a second for its next relist, nothing else.
func kubeletReadyMessage(pod *corev1.Pod) string {
	var sidecars []string
	for i := range pod.Spec.InitContainers {
		if sidecar(&pod.Spec.InitContainers[i]) {
			sidecars = append(sidecars, pod.Spec.InitContainers[i].Name)
		}
	}
	if len(sidecars) > 0 {
		return fmt.Sprintf("containers with unknown status: %s", sidecars)
	}
	return kubeletGateMessage
}

// ResizeDenied splits the resizes the API server refused, whose pods are
// recreated instead: those drained first (Step.DrainIfRefused), as steps
// to close their gates (the next pass finds the resize refused again, and
// the pod not Ready), and those deleted now.
func ResizeDenied(steps []Step) (drain []Step, recreate []*corev1.Pod) {
	for _, step := range steps {
		if step.DrainIfRefused {
			drain = append(drain, Step{Pod: step.Pod, Way: UpdateWay{Why: WhyResizeDenied}})
			continue
		}
		recreate = append(recreate, step.Pod)
	}
	return drain, recreate
}
