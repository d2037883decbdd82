package podset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Hour))
	cond := func(typ string, status metav1.ConditionStatus, reason, message string, at metav1.Time, generation int64) metav1.Condition {
		return metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: message,
			LastTransitionTime: at, ObservedGeneration: generation,
		}
	}
	const (
		ready       = "Ready"
		reconciling = "Reconciling"
		stalled     = "Stalled"
		tru         = metav1.ConditionTrue
		fls         = metav1.ConditionFalse
		stale       = "stale-hash"
	)
	ps3 := makePodSet("web").Replicas(3).Generation(4).Obj()
	h := TemplateHash(ps3)
	readyPods := func(ordinals ...int) []corev1.Pod { return readyPodsOf(ps3, h, ordinals...) }
	// reconcilingSince are the conditions of a PodSet that has been scaling
	// up since earlier.
	reconcilingSince := []metav1.Condition{
		cond(ready, fls, "ReplicasNotReady", "0/3 pods ready, 0/3 available, 0/3 up to date", earlier, 3),
		cond(reconciling, tru, "ScalingUp", "0/3 pods ready, 0/3 available, 0/3 up to date", earlier, 3),
		cond(stalled, fls, "ScalingUp", "0/3 pods ready, 0/3 available, 0/3 up to date", earlier, 3),
	}

	// status is the status of the PodSet web at generation 4 with these
	// counts, pod names and Ready, Reconciling and Stalled conditions.
	status := func(replicas, readyN, available, updated int32, names []string, conditions []metav1.Condition) podsetv1alpha1.PodSetStatus {
		return podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 4,
			Replicas:           replicas,
			ReadyReplicas:      readyN,
			AvailableReplicas:  available,
			UpdatedReplicas:    updated,
			PodNames:           names,
			Selector:           "podset.dev/name=web",
			Conditions:         conditions,
		}
	}
	// progressing are the conditions of a PodSet on its way: not Ready,
	// Reconciling and not Stalled for reason, all saying msg since at.
	progressing := func(msg, reason string, at metav1.Time) []metav1.Condition {
		return []metav1.Condition{
			cond(ready, fls, "ReplicasNotReady", msg, at, 4),
			cond(reconciling, tru, reason, msg, at, 4),
			cond(stalled, fls, reason, msg, at, 4),
		}
	}
	// converged are the conditions of a ready PodSet: Ready and Reconciling
	// moved now, Stalled False since stalledAt.
	converged := func(msg string, stalledAt metav1.Time) []metav1.Condition {
		return []metav1.Condition{
			cond(ready, tru, "AllReplicasReady", msg, now, 4),
			cond(reconciling, fls, "Converged", msg, now, 4),
			cond(stalled, fls, "Converged", msg, stalledAt, 4),
		}
	}
	// stalledFor are the conditions of a stalled PodSet: not Ready, saying
	// msg since readyAt; Stalled and not Reconciling, for reason and
	// saying stallMsg since now.
	stalledFor := func(msg string, readyAt metav1.Time, reason, stallMsg string) []metav1.Condition {
		return []metav1.Condition{
			cond(ready, fls, "ReplicasNotReady", msg, readyAt, 4),
			cond(reconciling, fls, reason, stallMsg, now, 4),
			cond(stalled, tru, reason, stallMsg, now, 4),
		}
	}
	const conflict1 = "pods web-1 exist and are not controlled by this PodSet; it leaves them alone: delete or rename them"
	web012 := []string{"web-0", "web-1", "web-2"}

	cases := map[string]struct {
		ps      *podsetv1alpha1.PodSet
		pods    []corev1.Pod
		stalled *Stall
		want    podsetv1alpha1.PodSetStatus
	}{
		"no pods: scaling up": {
			ps:   ps3,
			want: status(0, 0, 0, 0, nil, progressing("0/3 pods ready, 0/3 available, 0/3 up to date", "ScalingUp", now)),
		},
		"all ready and up to date, pod names by ordinal as numbers": {
			ps:   makePodSet("web").Replicas(11).Generation(4).Obj(),
			pods: readyPods(10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
			want: status(11, 11, 11, 11,
				[]string{"web-0", "web-1", "web-2", "web-3", "web-4", "web-5", "web-6", "web-7", "web-8", "web-9", "web-10"},
				converged("11/11 pods ready, 11/11 available, 11/11 up to date", now)),
		},
		"terminating pods count in replicas only": {
			ps: ps3,
			pods: append(readyPods(0, 1),
				makePod("web-2").controlledBy(ps3).ready().hash(h).terminating().obj()),
			want: status(3, 2, 2, 2, []string{"web-0", "web-1"}, progressing("2/3 pods ready, 2/3 available, 2/3 up to date", "ScalingUp", now)),
		},
		"a terminating surplus pod keeps the PodSet from being ready": {
			ps: ps3,
			pods: append(readyPods(0, 1, 2),
				makePod("web-3").controlledBy(ps3).ready().hash(h).terminating().obj()),
			want: status(4, 3, 3, 3, web012, progressing("3/3 pods ready, 3/3 available, 3/3 up to date", "WaitingForPods", now)),
		},
		"stale pods: rolling out": {
			ps: ps3,
			pods: append(readyPods(0, 1),
				makePod("web-2").controlledBy(ps3).ready().hash(stale).obj()),
			want: status(3, 3, 3, 2, web012, progressing("3/3 pods ready, 3/3 available, 2/3 up to date", "RollingOut", now)),
		},
		"surplus pods: scaling down": {
			ps:   makePodSet("web").Replicas(2).Generation(4).Obj(),
			pods: readyPods(0, 1, 2),
			want: status(3, 3, 3, 3, web012, progressing("3/2 pods ready, 3/2 available, 3/2 up to date", "ScalingDown", now)),
		},
		"unready up-to-date pods: waiting for pods": {
			ps: ps3,
			pods: append(readyPods(0, 1),
				makePod("web-2").controlledBy(ps3).running().hash(h).obj()),
			want: status(3, 2, 2, 3, web012, progressing("2/3 pods ready, 2/3 available, 3/3 up to date", "WaitingForPods", now)),
		},
		"a conflict stalls the PodSet and the foreign pod is not counted": {
			ps: ps3,
			pods: append(readyPods(0, 2),
				makePod("web-1").label(podsetv1alpha1.NameLabel, "web").ready().hash(h).obj()),
			stalled: ConflictStall([]string{"web-1"}),
			want: status(2, 2, 2, 2, []string{"web-0", "web-2"},
				stalledFor("2/3 pods ready, 2/3 available, 2/3 up to date", now, "PodConflict", conflict1)),
		},
		"a stall keeps a PodSet with every pod ready from being ready": {
			ps:      ps3,
			pods:    readyPods(0, 1, 2),
			stalled: &Stall{Reason: "InvalidTemplate", Message: "spec.template.spec.hostPID: must not be true (Pod Security restricted)"},
			want: status(3, 3, 3, 3, web012,
				stalledFor("3/3 pods ready, 3/3 available, 3/3 up to date", now, "InvalidTemplate", "spec.template.spec.hostPID: must not be true (Pod Security restricted)")),
		},
		"foreign pods are never counted": {
			ps: ps3,
			pods: append(readyPods(0, 1, 2),
				makePod("web-7").label(podsetv1alpha1.NameLabel, "web").ready().hash(h).obj(),
				makePod("web-5").controlledByOther("other-uid").label(podsetv1alpha1.NameLabel, "web").ready().hash(h).obj(),
				makePod("api-0").controlledBy(makePodSet("api").Obj()).ready().hash(h).obj()),
			want: status(3, 3, 3, 3, web012, converged("3/3 pods ready, 3/3 available, 3/3 up to date", now)),
		},
		"unchanged condition statuses keep their transition time": {
			ps: makePodSet("web").Replicas(3).Generation(4).Conditions(reconcilingSince...).Obj(),
			pods: append(readyPods(0, 1),
				makePod("web-2").controlledBy(ps3).ready().hash(stale).obj()),
			want: status(3, 3, 3, 2, web012, progressing("3/3 pods ready, 3/3 available, 2/3 up to date", "RollingOut", earlier)),
		},
		"changed condition statuses move their transition time to now": {
			ps:   makePodSet("web").Replicas(3).Generation(4).Conditions(reconcilingSince...).Obj(),
			pods: readyPods(0, 1, 2),
			want: status(3, 3, 3, 3, web012, converged("3/3 pods ready, 3/3 available, 3/3 up to date", earlier)),
		},
		"a stall after scaling up moves Stalled and Reconciling, not Ready": {
			ps:      makePodSet("web").Replicas(3).Generation(4).Conditions(reconcilingSince...).Obj(),
			pods:    readyPods(0, 2),
			stalled: ConflictStall([]string{"web-1"}),
			want: status(2, 2, 2, 2, []string{"web-0", "web-2"},
				stalledFor("2/3 pods ready, 2/3 available, 2/3 up to date", earlier, "PodConflict", conflict1)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(tc.ps, noneInFlight)
			plan := NewView(tc.ps, in.Revs, tc.pods, in.Now).Plan(in.Input)
			before := tc.ps.DeepCopy()
			got := NewView(tc.ps, in.Revs, tc.pods, now.Time).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost, Stall: tc.stalled})
			// The revisions and the progress clock have tests of their own.
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(podsetv1alpha1.PodSetStatus{}, "CurrentRevision", "UpdateRevision", "LastProgressTime")); diff != "" {
				t.Errorf("computeStatus() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.ps); diff != "" {
				t.Errorf("computeStatus() changed the PodSet (-before +after):\n%s", diff)
			}
			// A second pass over the same state with the new status in place
			// must compute the same status: otherwise every pass writes.
			again := tc.ps.DeepCopy()
			again.Status = got
			later := metav1.NewTime(now.Add(time.Minute))
			if diff := cmp.Diff(got, NewView(again, in.Revs, tc.pods, later.Time).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost, Stall: tc.stalled})); diff != "" {
				t.Errorf("computeStatus() on its own result changed (-first +second):\n%s", diff)
			}
		})
	}
}

func TestConflictStall(t *testing.T) {
	want := &Stall{
		Reason:  "PodConflict",
		Message: "pods web-1, web-10, web-2 exist and are not controlled by this PodSet; it leaves them alone: delete or rename them",
	}
	for _, names := range [][]string{
		{"web-1", "web-10", "web-2"},
		{"web-2", "web-10", "web-1"},
		{"web-10", "web-1", "web-2"},
	} {
		got := ConflictStall(names)
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(Stall{})); diff != "" {
			t.Errorf("conflictStall(%q) (-want +got):\n%s", names, diff)
		}
	}
}

func TestSignificantChange(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	base := func() podsetv1alpha1.PodSetStatus {
		return podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 2,
			Replicas:           3,
			ReadyReplicas:      2,
			PodNames:           []string{"web-0", "web-1", "web-2"},
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ReplicasNotReady", Message: "2/3", LastTransitionTime: at},
				{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "WaitingForPods", Message: "2/3", LastTransitionTime: at},
			},
		}
	}
	readyTrue := func(s *podsetv1alpha1.PodSetStatus) {
		s.Conditions[0].Status, s.Conditions[1].Status = metav1.ConditionTrue, metav1.ConditionFalse
	}
	cases := map[string]struct {
		old, change func(*podsetv1alpha1.PodSetStatus)
		want        bool
	}{
		"nothing":               {change: func(*podsetv1alpha1.PodSetStatus) {}},
		"counts":                {change: func(s *podsetv1alpha1.PodSetStatus) { s.ReadyReplicas, s.AvailableReplicas = 3, 3 }},
		"pod names":             {change: func(s *podsetv1alpha1.PodSetStatus) { s.PodNames = s.PodNames[:2] }},
		"a condition's message": {change: func(s *podsetv1alpha1.PodSetStatus) { s.Conditions[0].Message = "3/3" }},
		"a condition's reason":  {change: func(s *podsetv1alpha1.PodSetStatus) { s.Conditions[1].Reason = "RollingOut" }},
		"the conditions' order": {change: func(s *podsetv1alpha1.PodSetStatus) {
			s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0]
		}},
		"the observed generation while in progress": {change: func(s *podsetv1alpha1.PodSetStatus) { s.ObservedGeneration = 3 }},
		"every condition removed":                   {change: func(s *podsetv1alpha1.PodSetStatus) { s.Conditions = nil }},
		"Ready turning False": {old: readyTrue, change: func(s *podsetv1alpha1.PodSetStatus) {
			s.Conditions[0].Status, s.Conditions[1].Status = metav1.ConditionFalse, metav1.ConditionTrue
		}, want: true},
		"Stalled turning False": {old: func(s *podsetv1alpha1.PodSetStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue})
		}, change: func(s *podsetv1alpha1.PodSetStatus) { s.Conditions[2].Status = metav1.ConditionFalse }, want: true},
		"Ready turning True": {change: readyTrue, want: true},
		"Ready True for a new generation": {old: readyTrue, change: func(s *podsetv1alpha1.PodSetStatus) {
			readyTrue(s)
			s.ObservedGeneration = 3
		}, want: true},
		"Ready staying True, counts moving": {old: readyTrue, change: func(s *podsetv1alpha1.PodSetStatus) {
			readyTrue(s)
			s.ReadyReplicas = 1
		}},
		"Stalled added True": {change: func(s *podsetv1alpha1.PodSetStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue})
		}, want: true},
		"Stalled added False": {change: func(s *podsetv1alpha1.PodSetStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Stalled", Status: metav1.ConditionFalse})
		}},
		"Reconciling replaced by Stalled True": {change: func(s *podsetv1alpha1.PodSetStatus) {
			s.Conditions[1].Type = "Stalled"
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, cur := base(), base()
			if tc.old != nil {
				tc.old(&old)
				tc.old(&cur)
			}
			tc.change(&cur)
			if got := SignificantChange(old, cur); got != tc.want {
				t.Errorf("significantChange() = %v, want %v", got, tc.want)
			}
		})
	}
}
