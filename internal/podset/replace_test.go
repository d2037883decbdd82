package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// replacing asks for the pod to be replaced (kubectl podset replace).
func (b *podBuilder) replacing() *podBuilder {
	return b.label(podsetv1alpha1.ReplaceLabel, "true")
}

// TestReplacePlan checks what a pass does with pods that carry
// podset.dev/replace=true: drained (or deleted at once when every
// container sleeps in a preStop hook, or the pod is not Ready), within
// maxUnavailable, recreated rather than updated in place, and made again
// from the revision a deleted pod would be.
func TestReplacePlan(t *testing.T) {
	r := makeThreeRevisions(3)
	v1, v3, h1, h3 := r.v1, r.v3, r.h1, r.h3
	ready := func(ordinal int, hash string) *podBuilder {
		byHash := map[string]*podsetv1alpha1.PodSet{h1: v1, h3: v3}
		return makePod(PodName("web", ordinal)).controlledBy(byHash[hash]).ready().gated().hash(hash)
	}
	type want struct {
		Plan    planNames
		Drained []string
		Why     map[string]string
	}
	replaced := func(names ...string) map[string]string {
		why := map[string]string{}
		for _, n := range names {
			why[n] = WhyReplace
		}
		return why
	}
	cases := map[string]struct {
		ps   *podsetv1alpha1.PodSet
		pods []corev1.Pod
		// listed: the pods an EndpointSlice lists as ready.
		listed []string
		want   want
	}{
		"a Ready pod without hooks that a slice lists is drained first": {
			ps:     v3,
			pods:   []corev1.Pod{ready(0, h3).obj(), ready(1, h3).replacing().obj(), ready(2, h3).obj()},
			listed: []string{"web-0", "web-1", "web-2"},
			want:   want{Drained: []string{"web-1"}, Why: replaced("web-1")},
		},
		"a Ready pod without hooks that no slice lists is recreated at once: nothing routes to it": {
			ps:   v3,
			pods: []corev1.Pod{ready(0, h3).obj(), ready(1, h3).replacing().obj(), ready(2, h3).obj()},
			want: want{Plan: planNames{Rollout: []string{"web-1"}}, Why: replaced("web-1")},
		},
		"a Ready pod whose containers sleep in a preStop hook is deleted at once: the kubelet drains it": {
			ps:   v3,
			pods: []corev1.Pod{ready(0, h3).obj(), ready(1, h3).preStop().replacing().obj(), ready(2, h3).obj()},
			want: want{Plan: planNames{Rollout: []string{"web-1"}}, Why: replaced("web-1")},
		},
		"within maxUnavailable: one at a time, the highest ordinal first": {
			ps:   v3,
			pods: []corev1.Pod{ready(0, h3).preStop().replacing().obj(), ready(1, h3).obj(), ready(2, h3).preStop().replacing().obj()},
			want: want{Plan: planNames{Rollout: []string{"web-2"}}, Why: replaced("web-2")},
		},
		"the budget spent on an unavailable pod: the replacement waits": {
			ps:   v3,
			pods: []corev1.Pod{makePod("web-0").controlledBy(v3).running().gated().hash(h3).obj(), ready(1, h3).replacing().obj(), ready(2, h3).obj()},
			want: want{Plan: planNames{Empty: true}},
		},
		"a pod that is not Ready goes at once, outside the budget": {
			ps: v3,
			pods: []corev1.Pod{makePod("web-0").controlledBy(v3).running().gated().hash(h3).obj(),
				makePod("web-1").controlledBy(v3).running().gated().hash(h3).replacing().obj(), ready(2, h3).obj()},
			want: want{Plan: planNames{Rollout: []string{"web-1"}}, Why: replaced("web-1")},
		},
		"an out-of-date pod that could be updated in place is recreated": {
			ps:   v3,
			pods: []corev1.Pod{ready(0, h3).obj(), ready(1, h3).obj(), ready(2, h1).preStop().replacing().obj()},
			want: want{Plan: planNames{Rollout: []string{"web-2"}}, Why: replaced("web-2")},
		},
		"while paused: replaced all the same": {
			ps:   paused(v3),
			pods: []corev1.Pod{ready(0, h1).obj(), ready(1, h1).preStop().replacing().obj(), ready(2, h1).obj()},
			want: want{Plan: planNames{Rollout: []string{"web-1"}}, Why: replaced("web-1")},
		},
		"a terminating pod asked for again: nothing more": {
			ps:   v3,
			pods: []corev1.Pod{ready(0, h3).obj(), ready(1, h3).replacing().terminating().obj(), ready(2, h3).obj()},
			want: want{Plan: planNames{Empty: true}},
		},
		"the label set to anything but true: ignored": {
			ps:   v3,
			pods: []corev1.Pod{ready(0, h3).obj(), ready(1, h3).label(podsetv1alpha1.ReplaceLabel, "yes").obj(), ready(2, h3).obj()},
			want: want{Plan: planNames{Empty: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(tc.ps, noneInFlight)
			in.Revs = NewRevisions(tc.ps, r.history)
			in.Endpoints = Endpoints{}
			for _, name := range tc.listed {
				in.Endpoints[types.UID(name+"-uid")] = EndpointState{Listed: true}
			}
			p := NewView(tc.ps, in.Revs, tc.pods, in.Now).Plan(in.Input)
			got := want{Plan: namesOf(p), Why: p.Why}
			for _, s := range p.Drain {
				got.Drained = append(got.Drained, s.Pod.Name)
			}
			if len(got.Why) == 0 {
				got.Why = nil
			}
			if len(p.Drain) > 0 {
				got.Plan.Empty = false
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PlanPods() (-want +got):\n%s", diff)
			}
		})
	}

	// Once deleted, the pod is made again from the revision a deleted pod
	// is: below the partition, the one it ran.
	held := withPartition(v3, 3)
	in := testInput(held, noneInFlight)
	in.Revs = NewRevisions(held, r.history)
	in.Held = Held{1: h1}
	p := NewView(held, in.Revs, []corev1.Pod{ready(0, h1).obj(), ready(2, h1).obj()}, in.Now).Plan(in.Input)
	if diff := cmp.Diff(map[int]string{1: h1}, p.Revisions); diff != "" || !cmp.Equal(p.Create, []int{1}) {
		t.Errorf("after the replaced pod is gone: create %v from %v, want 1 from its own revision (-want +got):\n%s", p.Create, p.Revisions, diff)
	}
}
