package podset

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The readiness gate, the drain and the restart record: every decision
// about the gate is here; the controller only sends the writes
// (controller/updates.go). Every pod the operator makes carries its readiness gate
// (podset.dev/InPlaceUpdateReady), so before it stops a Ready pod's
// containers, to delete the pod or to restart them in place, it can take
// the pod out of Service endpoints:
//
//  1. close the gate, and mark the pod not Ready, in one status write
//     (the controller's beginDrains): the EndpointSlice controller drops
//     the pod at once, without waiting for the kubelet;
//  2. wait for the kubelet to report the pod not Ready itself (a Ready
//     condition False with a reason that is not DrainingReason): from then
//     on the kubelet computes Ready from the closed gate, and no status it
//     writes can put the pod back into endpoints;
//  3. wait for the EndpointSlices to drop the pod (Endpoints), for at
//     most endpointsSilence: a kube-controller-manager that is down or
//     not leading yet (after an API server outage) leaves a pod the
//     kubelet reports not Ready in the slices that kube-proxy programs;
//  4. wait spec.drainSeconds from the first pass that saw the pod not
//     Ready, or from when the last slice dropped it, whichever is later,
//     for the dataplane (kube-proxy, load balancers) to follow;
//  5. delete the pod, or apply its new images (with a restart record);
//  6. open the gate again once the pod's containers restarted for its
//     revision and its resize is carried out (GateOpens).
//
// A pod that is not Ready serves nothing and is stopped at once, as is a
// Ready pod to delete that no EndpointSlice lists (endpointsLag), a
// pod without the gate (made by an operator that gave it only under
// InPlaceIfPossible) and one whose every container has a preStop hook
// that holds it for the drain when it is deleted (holdsDrain): the
// operator's own sleep of spec.drainSeconds (addDrainHooks), which every
// pod it makes carries so that a stop by anyone else is drained too, or
// the app's own hook. A pod restarted in place with such hooks goes
// through steps 1, 3 and 5: once the slices have dropped it, the hook
// holds the containers for the drain (the slices' wait keeps a restart
// from beginning while a kube-controller-manager that is down still lists
// the pod). It skips step 2, so that the kubelet syncs the pod once, not
// twice (DrainConditions): the sync that runs the hook reports the
// pod not Ready as it begins, and a kubelet that wrote Ready back before
// it (its status manager's reconciliation, from a Ready it cached) only
// puts the pod back for the moment its old containers still serve.
// Everything a pass needs is on the pod, so an operator restarted
// mid-drain resumes it where it was.

// drainStage is where a pod the operator means to stop stands.
type drainStage int

const (
	// stopNow: stop the pod in this pass.
	stopNow drainStage = iota
	// beginDrain: close the pod's gate (within the budget, for a rollout):
	// Plan.Drain, ActionDrain, the controller's beginDrain.
	beginDrain
	// draining: the gate is closed; wait for the kubelet, or the drain.
	// Or, for a pod no EndpointSlice lists yet, wait to see whether one
	// does (endpointsLag).
	draining
)

// drainFor is where a controlled, live pod the operator means to stop
// stands, and how long until the drain of one draining ends (0: an event
// brings the next step, or it is over). preStop says the containers that
// stop all run a preStop hook: the drain time is theirs, not the
// operator's (the kubelet runs the hook before it stops a container,
// whether it deletes the pod or restarts the container in place). A pod
// to delete (deleting) then needs no gate either: a terminating pod
// leaves endpoints while its hooks run. A container restarted in place
// does not: the gate keeps traffic off it while it restarts.
//
// ep is what the EndpointSlices say of the pod (Endpoints).
func drainFor(ps *podsetv1alpha1.PodSet, pod *corev1.Pod, seen, now time.Time, ep EndpointState, preStop, deleting bool) (drainStage, time.Duration) {
	switch {
	case deleting && preStop && !gateClosed(pod):
		return stopNow, 0
	case deleting && !gateClosed(pod) && hasGate(pod) && podReady(pod) && !ep.Listed && ep.drainLeft(ps, now) <= 0:
		// Nothing to drain it from (endpointsLag), once it has been Ready
		// long enough for a slice to list it if a Service selects it.
		if left := readySince(pod).Add(endpointsLag).Sub(now); left > 0 {
			return draining, left
		}
		return stopNow, 0
	case gateClosed(pod):
		// A pod whose hooks hold the drain does not wait for its kubelet's
		// report: the kubelet sees the closed gate before the new images
		// (its watch delivers the writes in order), so the sync that runs
		// the hooks reports the pod not Ready as it begins
		// (DrainConditions).
		if !preStop && !kubeletNotReady(pod) {
			// A pod to delete whose kubelet has not answered for
			// kubeletSilence (its node is down, or partitioned) is
			// deleted on the operator's own not-Ready: its kubelet can
			// put nothing back. A restart in place waits for it: only
			// that kubelet could carry it out.
			gate := gateCondition(pod)
			if !deleting {
				return draining, 0
			}
			if left := gate.LastTransitionTime.Add(kubeletSilence).Sub(now); left > 0 {
				return draining, left
			}
		}
		if ep.Listed {
			// Still in the slices kube-proxy programs. Their controller
			// is waited for endpointsSilence from when the operator saw
			// the pod not Ready (else from its Ready condition's time),
			// then the drain goes on without it: a pod is never held
			// forever by a controller that is gone.
			from := seen
			if c := podCondition(pod, corev1.PodReady); from.IsZero() && c != nil {
				from = c.LastTransitionTime.Time
			}
			if left := from.Add(endpointsSilence).Sub(now); left > 0 {
				return draining, left
			}
		}
		if preStop {
			// The hooks hold the containers for the drain once they are
			// told to stop: out of the slices, nothing more to wait for.
			return stopNow, 0
		}
		if left := max(drainLeft(ps, pod, seen, now), ep.drainLeft(ps, now)); left > 0 {
			return draining, left
		}
		return stopNow, 0
	case !hasGate(pod) || !podReady(pod):
		return stopNow, 0
	}
	return beginDrain, 0
}

// kubeletSilence is how long a drain waits for a kubelet to report a pod
// to delete not Ready before it goes on without it: a kubelet that runs
// answers within a couple of seconds, and the node lifecycle controller
// marks a node that stopped answering NotReady after 40 s or more.
const kubeletSilence = 30 * time.Second

// endpointsLag is how long a Ready pod that no EndpointSlice lists as
// ready is waited for before the operator deletes it without a drain:
// the EndpointSlice controller lists a Ready pod that a Service selects
// within milliseconds of the pod's Ready, and the operator's cache shows
// the slice a moment later.
//
// A pod to delete that no slice lists has nothing to drain from: every
// path traffic takes to a pod by a Service reads the slices (kube-proxy,
// a headless Service's DNS records, a service mesh, a load balancer's
// controller in IP mode), and a terminating pod is never listed as ready
// again. So it is deleted at once, as a ReplicaSet deletes its pods. A
// client that finds pods by other means (their IPs from the API) is not
// drained for: an app with such clients keeps its containers' own preStop
// hooks, which the kubelet runs whoever deletes the pod. Were the
// operator's cache to miss a slice that lists the pod for longer than
// endpointsLag, the pod would stop undrained: its containers get SIGTERM
// while kube-proxy still sends it new connections, until it follows the
// slice that marks it terminating.
const endpointsLag = time.Second

// endpointsSilence is how long a drain waits for the EndpointSlices to
// drop a pod its kubelet reports not Ready: their controller drops it
// within a second or two when it runs, and a kube-controller-manager that
// restarts after an API server outage leads again within about 20 s.
const endpointsSilence = 60 * time.Second

// Endpoints is what the EndpointSlices say of the pods that drain, by pod
// UID: listed as ready by some slice, or when the last one dropped the
// pod. A pod no slice listed since the operator started (no Service
// selects it) has no entry.
type Endpoints map[types.UID]EndpointState

// EndpointState is what the EndpointSlices say of one pod: Listed, a slice
// lists it as ready; otherwise Left, when the last slice that did stopped.
type EndpointState struct {
	Listed bool
	Left   time.Time
}

// drainLeft is how long the pod must still stay out of endpoints counted
// from when the last slice dropped it: DrainSeconds from Left (0 when no
// slice ever listed it).
func (s EndpointState) drainLeft(ps *podsetv1alpha1.PodSet, now time.Time) time.Duration {
	if s.Listed || s.Left.IsZero() {
		return 0
	}
	return s.Left.Add(DrainSeconds(ps)).Sub(now)
}

// DrainSeconds is how long a pod stays out of endpoints before its
// containers stop: spec.drainSeconds, or the deprecated
// spec.updateStrategy.inPlaceDrainSeconds where a PodSet stored before it
// was replaced sets it longer (admission refuses new PodSets where they
// differ).
func DrainSeconds(ps *podsetv1alpha1.PodSet) time.Duration {
	seconds := int32(podsetv1alpha1.DefaultDrainSeconds)
	if s := ps.Spec.DrainSeconds; s != nil {
		seconds = max(0, *s)
	}
	if s := ps.Spec.UpdateStrategy.InPlaceDrainSeconds; s != nil {
		seconds = max(seconds, *s)
	}
	return time.Duration(seconds) * time.Second
}

// drainLeft is how long a pod whose gate is closed must still stay out of
// endpoints: DrainSeconds from when it left them. That is known two ways,
// and the drain ends by whichever ends first: from seen, when the operator
// first saw the pod not Ready (Drains; zero when it never did), and from
// the Ready condition's time. Condition times are whole seconds, so a
// second more is waited from it than the field says: never less than it.
func drainLeft(ps *podsetv1alpha1.PodSet, pod *corev1.Pod, seen, now time.Time) time.Duration {
	drain := DrainSeconds(ps)
	if drain == 0 {
		return 0
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			end := c.LastTransitionTime.Add(drain + time.Second)
			if !seen.IsZero() && seen.Add(drain).Before(end) {
				end = seen.Add(drain)
			}
			return end.Sub(now)
		}
	}
	return 0
}

// Draining reports whether the operator has closed the pod's gate: it is
// being drained, or its containers restart in place.
func Draining(pod *corev1.Pod) bool { return gateClosed(pod) }

// allPreStop reports whether every container of the pod that runs beside
// the others (containers and sidecars), or every one named, has a preStop
// hook that holds its stop for the drain (holdsDrain): the kubelet then
// keeps the container running for the drain whoever stops it, and the
// operator waits for none of its own.
func allPreStop(ps *podsetv1alpha1.PodSet, pod *corev1.Pod, names []string) bool {
	drain := DrainSeconds(ps)
	return everyRunningContainer(pod, func(c *corev1.Container, _ *corev1.ContainerStatus) bool {
		if names != nil && !slices.Contains(names, c.Name) {
			return true
		}
		return holdsDrain(c, drain)
	})
}

// holdsDrain reports whether container c's preStop hook holds its stop
// for a drain: an app's own hook does, whatever it runs (it is the app's
// own drain, as before the operator added any); a sleep does for as long
// as it sleeps. The operator's sleep (DrainHookSeconds) was as long as
// spec.drainSeconds when the pod was made; a longer drain set since is
// the operator's to wait for before it stops the pod.
func holdsDrain(c *corev1.Container, drain time.Duration) bool {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return false
	}
	if s := c.Lifecycle.PreStop.Sleep; s != nil {
		return time.Duration(s.Seconds)*time.Second >= drain
	}
	return true
}

// Drains is when the operator first saw each pod whose gate it closed
// not Ready, by pod UID: a drain counts from then when that ends before
// the Ready condition's whole-second time says (drainLeft). It is what a
// pass remembers for the next ones.
type Drains map[types.UID]time.Time

// Observe is d with the pods of v that drain now: those it had keep the
// time they were first seen, the others are seen at at, the time the pass
// began, after the pods were read (they left Ready before it). Pods that
// no longer drain are left out, and so are pods Ready again: a pod that
// went back into endpoints drains again from the next time it is seen
// out of them.
func (d Drains) Observe(v *View, at time.Time) Drains {
	var next Drains
	for _, members := range [][]*Member{v.Slots, v.Surplus} {
		for _, m := range members {
			if m == nil || !m.Controlled || !gateClosed(m.Pod) || kubeletReady(m.Pod) {
				continue
			}
			if next == nil {
				next = Drains{}
			}
			if t, ok := d[m.Pod.UID]; ok {
				next[m.Pod.UID] = t
			} else {
				next[m.Pod.UID] = at
			}
		}
	}
	return next
}

// Moved is d after a draining pod left Ready at at (left), or went back
// into it: a drain counts from the last time the pod left, whatever a pass
// saw of it (Observe).
//
// It returns a new map and leaves d as it is: a pass that is running may
// be reading d (Input.Drains) while the pod watch reports a move.
func (d Drains) Moved(uid types.UID, left bool, at time.Time) Drains {
	next := maps.Clone(d)
	if next == nil {
		next = Drains{}
	}
	if left {
		next[uid] = at
	} else {
		delete(next, uid)
	}
	return next
}

// EndpointsMove reports whether an update of a pod took it out of Ready
// (left) or put it back (back).
func EndpointsMove(old, cur *corev1.Pod) (left, back bool) {
	was, is := kubeletReady(old), kubeletReady(cur)
	return was && !is, !was && is
}

// RestartRecordAnnotation holds a pod's restartRecord.
const RestartRecordAnnotation = "podset.dev/in-place-restart"
