package controller

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// TestPassEvents checks the events a pass sends, made from its plan, what
// its writes did and the status it wrote: one per kind of change, a
// Warning for what a user must act on, and the deadline's once.
func TestPassEvents(t *testing.T) {
	ps := executePodSet()
	ps.Spec.LostNodeReplacement = &podsetv1alpha1.LostNodeReplacement{}
	revs := podset.NewRevisions(ps, nil)
	onNode := func(name, node string) *corev1.Pod {
		pod := ownPod(ps, name)
		pod.Spec.NodeName = node
		return pod
	}
	lostSince := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	stalled := func(reason string) podsetv1alpha1.PodSetStatus {
		return podsetv1alpha1.PodSetStatus{Conditions: []metav1.Condition{{
			Type: podsetv1alpha1.StalledCondition, Status: metav1.ConditionTrue, Reason: reason, Message: "no progress for 600s",
		}}}
	}
	deadline := stalled(podsetv1alpha1.ProgressDeadlineExceededReason)
	normal := func(reason, action, note string) podSetEvent {
		return podSetEvent{Type: corev1.EventTypeNormal, Reason: reason, Action: action, Note: note}
	}
	warning := func(reason, action, note string) podSetEvent {
		return podSetEvent{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Note: note}
	}

	cases := map[string]struct {
		plan        podset.Plan
		done        podset.Outcome
		old, status podsetv1alpha1.PodSetStatus
		statusErr   error
		want        []podSetEvent
	}{
		"a pass that changed nothing says nothing": {},
		"one event per kind of change, in a stable order": {
			// The recreated by why, sorted: a replacement asked for sorts
			// first.
			done: podset.Outcome{
				Created:    []string{"web-0", "web-1", "web-2"},
				Pruned:     []string{"web-4"},
				Recreated:  map[string][]string{podset.WhyPolicy: {"web-3"}, podset.WhyReplace: {"web-5"}},
				Restarting: []string{"web-6"},
				Stopping:   map[string][]string{podset.WhySurplus: {"web-7"}},
			},
			want: []podSetEvent{
				normal(podsetv1alpha1.ScalingDownReason, "Delete", "deleted surplus pods web-4"),
				normal(podsetv1alpha1.ReplacingRequestedReason, "Delete", "deleted pods web-5 to make them again: "+podset.WhyReplace),
				normal(podsetv1alpha1.RollingOutReason, "Delete", "deleted out-of-date pods web-3 to recreate them: "+podset.WhyPolicy),
				normal(podsetv1alpha1.UpdatedInPlaceReason, "Drain",
					"took pods web-6 out of Ready to restart their containers in place for revision "+podset.RevisionName(ps, revs.Update)),
				normal(podsetv1alpha1.ScalingDownReason, "Drain", "took pods web-7 out of Ready to delete them once drained: "+podset.WhySurplus),
				normal(podsetv1alpha1.ScalingUpReason, "Create", "created pods web-0, web-1, web-2"),
			},
		},
		"pods force-deleted on lost nodes: a Warning per node": {
			plan: podset.Plan{LostSince: map[string]time.Time{"node-a": lostSince, "node-b": lostSince}},
			done: podset.Outcome{ReplacedLost: []*corev1.Pod{onNode("web-1", "node-b"), onNode("web-0", "node-a"), onNode("web-2", "node-a")}},
			want: []podSetEvent{
				warning(podsetv1alpha1.ReplacingLostReason, "Delete", "force-deleted pods web-0, web-2 of node node-a, lost since 2026-11-28T12:00:00Z "+
					"(spec.lostNodeReplacement.afterSeconds 300), to create them again on a healthy node; if the node still runs them, they run twice until it is back"),
				warning(podsetv1alpha1.ReplacingLostReason, "Delete", "force-deleted pods web-1 of node node-b, lost since 2026-11-28T12:00:00Z "+
					"(spec.lostNodeReplacement.afterSeconds 300), to create them again on a healthy node; if the node still runs them, they run twice until it is back"),
			},
		},
		"strays are reported while nothing stalls the pods": {
			plan: podset.Plan{Strays: []string{"web-9"}},
			want: []podSetEvent{warning(podsetv1alpha1.StrayPodsReason, "Observe",
				"pods web-9 carry the label podset.dev/name=web but are not controlled by this PodSet; they are neither counted nor touched")},
		},
		"a stall on the pods is reported, not the strays": {
			plan: podset.Plan{Strays: []string{"web-9"}},
			done: podset.Outcome{
				Rejection: &podset.Rejection{Reason: "Forbidden", Message: "violates PodSecurity"},
				Stall:     &podset.Stall{Reason: podsetv1alpha1.PodRejectedReason, Message: "the API server refused a pod"},
			},
			want: []podSetEvent{warning(podsetv1alpha1.PodRejectedReason, "Create", "the API server refused a pod")},
		},
		"an invalid template is a validation": {
			done: podset.Outcome{Stall: &podset.Stall{Reason: podsetv1alpha1.InvalidTemplateReason, Message: "bad template"}},
			want: []podSetEvent{warning(podsetv1alpha1.InvalidTemplateReason, "Validate", "bad template")},
		},
		"the progress deadline passing is reported once": {
			status: deadline,
			want:   []podSetEvent{warning(podsetv1alpha1.ProgressDeadlineExceededReason, "Rollout", "no progress for 600s")},
		},
		"a deadline passed before is not reported again": {old: deadline, status: deadline},
		"nor one whose status was not written":           {status: deadline, statusErr: errors.New("conflict")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := passEvents(ps, &tc.plan, &tc.done, revs, &tc.old, &tc.status, tc.statusErr)
			if !slices.Equal(got, tc.want) {
				t.Errorf("events:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

// TestRecordSendsThroughTheWriter checks that a pass's events reach the
// writer, the only way out of the operator.
func TestRecordSendsThroughTheWriter(t *testing.T) {
	w := &recordingWriter{}
	r := testReconciler(w, nil)
	ps := executePodSet()
	p := &pass{r: r, ps: ps, view: &podset.View{Revs: podset.NewRevisions(ps, nil)}, outcome: podset.Outcome{Created: []string{"web-0"}}}
	p.record(t.Context(), nil)
	want := []podSetEvent{{Type: corev1.EventTypeNormal, Reason: podsetv1alpha1.ScalingUpReason, Action: "Create", Note: "created pods web-0"}}
	if !slices.Equal(w.events, want) {
		t.Errorf("events sent: %q, want %q", w.events, want)
	}
}
