package podset

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// SlimPod keeps of a pod only what the operator reads: its identity,
// labels, annotations, owners and deletion timestamp, its containers' names,
// images and resources (and whether they have a preStop hook), its readiness gates, its node, its hostname and
// subdomain (an apply to a running pod sends the ones it has), its phase, its Ready condition
// with the time it last changed (minReadySeconds), its InPlaceUpdateReady
// condition and a pending resize. While an in-place update waits for new
// images, it keeps the images its containers report. Of a pod that is not Ready it also keeps what
// says why (the Ready and PodScheduled conditions' reasons and messages,
// the containers' waiting reasons and last exits), for the message of a
// missed progress deadline. A pod's spec and status are most of its size;
// the planner, the status and the pod predicate need none of the rest, so
// the cache costs a fraction of the memory per pod.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: the informer passes it as it is
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			Annotations:       pod.Annotations,
			OwnerReferences:   pod.OwnerReferences,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			Containers:     slimContainers(pod.Spec.Containers),
			InitContainers: slimContainers(pod.Spec.InitContainers),
			ReadinessGates: pod.Spec.ReadinessGates,
			NodeName:       pod.Spec.NodeName,
			Hostname:       slimHostname(pod),
			Subdomain:      pod.Spec.Subdomain,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	ready := podReady(pod)
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == podsetv1alpha1.InPlaceUpdateReadyCondition,
			(c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress) && c.Status == corev1.ConditionTrue:
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{
				Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason,
			})
		case c.Type == corev1.PodReady && ready:
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		case c.Type == corev1.PodReady,
			c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{
				Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			})
		}
	}
	// Images only matter while an in-place update waits for them.
	updating := hasGate(pod) && !gateOpen(pod)
	if !ready || updating {
		slim.Status.Reason = pod.Status.Reason
		slim.Status.InitContainerStatuses = slimStatuses(pod.Status.InitContainerStatuses, updating)
		slim.Status.ContainerStatuses = slimStatuses(pod.Status.ContainerStatuses, updating)
	}
	return slim, nil
}

// slimHostname is a pod's hostname, sharing the pod name's string when it
// is the pod's name, as PodFromTemplate makes it: no copy of its own.
func slimHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname == pod.Name {
		return pod.Name
	}
	return pod.Spec.Hostname
}

// slimStatuses keeps of container statuses the waiting reasons and the last
// exits of waiting containers, and with images set, every container's
// name, image, restart count, resources and whether it runs.
func slimStatuses(statuses []corev1.ContainerStatus, images bool) []corev1.ContainerStatus {
	var slim []corev1.ContainerStatus
	for _, cs := range statuses {
		if cs.State.Waiting == nil && !images {
			continue
		}
		s := corev1.ContainerStatus{Name: cs.Name}
		if images {
			s.Image = cs.Image
			s.RestartCount = cs.RestartCount
			s.Resources = cs.Resources
			if cs.State.Running != nil {
				s.State.Running = &corev1.ContainerStateRunning{}
			}
		}
		if cs.State.Waiting != nil {
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: cs.State.Waiting.Reason}
			if t := cs.LastTerminationState.Terminated; t != nil {
				s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: t.Reason, ExitCode: t.ExitCode}
			}
		}
		slim = append(slim, s)
	}
	return slim
}

// slimContainers keeps of containers their names, images, cpu and memory
// (an apply to a running pod sends the ones it has) and whether an init
// container is a sidecar.
func slimContainers(containers []corev1.Container) []corev1.Container {
	if len(containers) == 0 {
		return nil
	}
	slim := make([]corev1.Container, len(containers))
	for i, c := range containers {
		slim[i] = corev1.Container{
			Name:          c.Name,
			Image:         c.Image,
			RestartPolicy: c.RestartPolicy,
			Resources:     resourceTable.intern(c.Resources),
		}
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			slim[i].Lifecycle = hasPreStop
			if s := c.Lifecycle.PreStop.Sleep; s != nil {
				slim[i].Lifecycle = sleepHooks.of(s.Seconds)
			}
		}
	}
	return slim
}

// hasPreStop stands in a slim pod for a container's lifecycle with a
// preStop hook other than a sleep: the drain only asks whether there is
// one (allPreStop).
var hasPreStop = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{}}

// sleepHooks holds one lifecycle of each preStop sleep the cache has seen,
// by its seconds: the drain asks how long a sleep holds the container
// (holdsDrain), an apply to a running pod sends it (keepDrainHooks), and
// the pods of a PodSet all sleep as long.
var sleepHooks sleepTable

type sleepTable struct {
	mu    sync.Mutex
	hooks map[int64]*corev1.Lifecycle
}

func (t *sleepTable) of(seconds int64) *corev1.Lifecycle {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.hooks[seconds]; ok {
		return l
	}
	if t.hooks == nil {
		t.hooks = map[int64]*corev1.Lifecycle{}
	}
	l := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: seconds}}}
	t.hooks[seconds] = l
	return l
}

// resourceTable holds one copy of each container cpu and memory the cache
// has seen: the pods of a template all ask for the same, and a slim pod
// keeps a reference to the shared copy instead of maps of its own (about
// 1.5 KiB a pod). A VerticalPodAutoscaler gives pods values of their own;
// past maxInterned distinct values, pods keep their own maps.
var resourceTable = &internedResources{byKey: map[string]corev1.ResourceRequirements{}}

const maxInterned = 4096

type internedResources struct {
	mu    sync.Mutex
	byKey map[string]corev1.ResourceRequirements
}

// intern is r's requests and limits, shared with every equal one. The
// result is read only.
func (t *internedResources) intern(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.ResourceRequirements{}
	}
	var b strings.Builder
	for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			q := list[name]
			b.WriteString(string(name))
			b.WriteByte('=')
			b.WriteString(q.String())
			b.WriteByte(',')
		}
		b.WriteByte(';')
	}
	key := b.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if shared, ok := t.byKey[key]; ok {
		return shared
	}
	own := corev1.ResourceRequirements{Requests: r.Requests, Limits: r.Limits}
	if len(t.byKey) < maxInterned {
		t.byKey[key] = own
	}
	return own
}
