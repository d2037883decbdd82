package podset

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The progress deadline works as Deployment's does: progress is a
// comparison of the new status with the last one written, and the time of
// the last progress lives in the status (status.lastProgressTime), so an
// operator restart or a leader change keeps the clock. It is set only when
// the status changes anyway (new counts, a new generation, Ready lost), so
// keeping it costs no status write of its own.

// lastProgress is status.lastProgressTime for a new status: now if it shows
// progress over the last status written (ps.Status), else the time of the
// last progress.
//
// Progress is a new spec observed; Ready lost (the clock starts); more pods
// updated or available; fewer pods on an older template; or the number of
// live pods closer to replicas (pods created or pruned). Readiness alone is
// not progress: a crash-looping pod turns Ready again and again, and only
// minReadySeconds tells such a pod from a healthy one, as for Deployments.
func lastProgress(ps *podsetv1alpha1.PodSet, cur *podsetv1alpha1.PodSetStatus, ready bool, now metav1.Time) *metav1.Time {
	old := &ps.Status
	desired := int(Replicas(ps))
	distance := func(n int) int { return max(n-desired, desired-n) }
	switch {
	case old.LastProgressTime == nil,
		old.ObservedGeneration != ps.Generation,
		meta.IsStatusConditionTrue(old.Conditions, podsetv1alpha1.ReadyCondition) && !ready,
		cur.UpdatedReplicas > old.UpdatedReplicas,
		cur.AvailableReplicas > old.AvailableReplicas,
		cur.Replicas-cur.UpdatedReplicas < old.Replicas-old.UpdatedReplicas,
		distance(len(cur.PodNames)) < distance(len(old.PodNames)):
		return &now
	}
	return old.LastProgressTime
}

// progressDeadline is spec.progressDeadlineSeconds as a duration; the
// schema defaults it.
func progressDeadline(ps *podsetv1alpha1.PodSet) time.Duration {
	seconds := int32(podsetv1alpha1.DefaultProgressDeadlineSeconds)
	if ps.Spec.ProgressDeadlineSeconds != nil {
		seconds = max(1, *ps.Spec.ProgressDeadlineSeconds)
	}
	return time.Duration(seconds) * time.Second
}

// deadlineIn is how long until the progress deadline of a PodSet that made
// its last progress at last passes; 0 or less once it has.
func deadlineIn(ps *podsetv1alpha1.PodSet, last *metav1.Time, now time.Time) time.Duration {
	if last == nil {
		return progressDeadline(ps)
	}
	return last.Add(progressDeadline(ps)).Sub(now)
}

// deadlineStall is the stall of a PodSet past its progress deadline: the
// message names each stuck pod with what Kubernetes reports about it, pods
// with the same problem together. It changes only when a pod's problem
// does, so it does not make every pass write status.
func (v *View) deadlineStall(available int32) *Stall {
	ps := v.PodSet
	desired := len(v.Slots)
	minReady := minReadySeconds(ps)
	rule := newStrategyRule(ps)
	var order []string
	stuck := map[string][]string{}
	for i, m := range v.Slots {
		ordinal := v.Start + i
		var problem string
		switch {
		case m == nil:
			problem = "not created"
		case !m.Controlled:
			problem = "the name is held by a pod this PodSet does not control"
		case m.Terminating:
			problem = "terminating"
		case !m.Available:
			problem = podProblem(m.Pod, minReady)
		case m.Hash != v.Revs.Update && rule.outOfDate(ordinal) == StateStale:
			problem = "waiting to be updated"
		default:
			continue
		}
		if _, ok := stuck[problem]; !ok {
			order = append(order, problem)
		}
		stuck[problem] = append(stuck[problem], PodName(ps.Name, ordinal))
	}
	const mostProblems = 5
	var parts []string
	for i, problem := range order {
		if i == mostProblems {
			parts = append(parts, fmt.Sprintf("and %d more problems", len(order)-mostProblems))
			break
		}
		parts = append(parts, Summarize(stuck[problem])+": "+problem)
	}
	return &Stall{
		Reason: podsetv1alpha1.ProgressDeadlineExceededReason,
		Message: fmt.Sprintf("no progress for %s (spec.progressDeadlineSeconds), %d/%d pods available; %s",
			progressDeadline(ps), available, desired, strings.Join(parts, "; ")),
	}
}

// podProblem says why an existing pod is not available, in Kubernetes' own
// words: the scheduler's reason and message, a container's waiting reason
// (ImagePullBackOff, CrashLoopBackOff with its last exit), or the Ready
// condition's reason and message (a failing readiness probe).
func podProblem(pod *corev1.Pod, minReady time.Duration) string {
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return strings.TrimSuffix(string(pod.Status.Phase)+" "+pod.Status.Reason, " ")
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return joinNonEmpty(": ", c.Reason, c.Message)
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			w := cs.State.Waiting
			if w == nil || w.Reason == "" || w.Reason == "ContainerCreating" || w.Reason == "PodInitializing" {
				continue
			}
			problem := fmt.Sprintf("container %s: %s", cs.Name, w.Reason)
			if t := cs.LastTerminationState.Terminated; t != nil {
				problem += fmt.Sprintf(" (last exit: %s, code %d)", t.Reason, t.ExitCode)
			}
			return problem
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue && c.Reason != "" {
			return joinNonEmpty(": ", c.Reason, c.Message)
		}
	}
	if podReady(pod) {
		return fmt.Sprintf("Ready for less than minReadySeconds (%s)", minReady)
	}
	if pod.Status.Phase == "" {
		return "Pending"
	}
	return string(pod.Status.Phase)
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// Summarize lists pod names in a short, stable form for events: by
// ordinal, whatever order the writes completed in, so that the same change
// reads the same in every pass and the event recorder can fold repeats of
// it into one series.
func Summarize(names []string) string {
	const most = 5
	names = slices.SortedFunc(slices.Values(names), byOrdinal)
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// byOrdinal orders the names of one PodSet's pods (<name>-<ordinal>) by
// their ordinals: a shorter name has fewer digits, so a smaller ordinal.
func byOrdinal(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}
