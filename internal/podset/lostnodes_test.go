package podset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func (b *podBuilder) on(node string) *podBuilder {
	b.pod.Spec.NodeName = node
	return b
}

// lostPlan is what a plan does about lost nodes, by pod name.
type lostPlan struct {
	ReplaceLost []string
	LostHeld    []string
	Create      []int
	Rollout     []string
	// Wake is the plan's wake-up.
	Wake time.Duration
}

func TestPlanReplacesPodsOfLostNodes(t *testing.T) {
	const after = 60
	ps := makePodSet("web").Replicas(3).LostNodeAfter(after).Obj()
	h := TemplateHash(ps)
	pod := func(ordinal int, node string) *podBuilder {
		return makePod(PodName("web", ordinal)).controlledBy(ps).ready().hash(h).on(node)
	}
	healthy := func(ordinals ...int) []corev1.Pod {
		var pods []corev1.Pod
		for _, o := range ordinals {
			pods = append(pods, pod(o, "good").obj())
		}
		return pods
	}
	lostLong := testNow.Add(-(after + 10) * time.Second)
	// small is a cluster of ten nodes, few of them lost.
	small := func(lost map[string]time.Time) Nodes { return Nodes{Lost: lost, LostInCluster: len(lost), Total: 10} }

	cases := map[string]struct {
		ps    *podsetv1alpha1.PodSet
		pods  []corev1.Pod
		nodes Nodes
		want  lostPlan
	}{
		"a ready pod on a node lost for afterSeconds is replaced": {
			ps:    ps,
			pods:  append(healthy(0, 1), pod(2, "gone").obj()),
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{ReplaceLost: []string{"web-2"}},
		},
		"a terminating pod on a lost node is replaced: the force deletion frees its name": {
			ps:    ps,
			pods:  append(healthy(0, 1), pod(2, "gone").running().terminating().obj()),
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{ReplaceLost: []string{"web-2"}},
		},
		"paused: a pod of a lost node is replaced all the same": {
			ps:    paused(ps),
			pods:  append(healthy(0, 1), pod(2, "gone").obj()),
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{ReplaceLost: []string{"web-2"}},
		},
		"a node lost for less than afterSeconds: a pass wakes when it is due": {
			ps:    ps,
			pods:  append(healthy(0, 1), pod(2, "gone").running().obj()),
			nodes: small(map[string]time.Time{"gone": testNow.Add(-20 * time.Second)}),
			want:  lostPlan{Wake: 41 * time.Second},
		},
		"afterSeconds 0: replaced as soon as the node is lost": {
			ps:    makePodSet("web").Replicas(3).LostNodeAfter(0).Obj(),
			pods:  append(healthy(0, 1), pod(2, "gone").running().obj()),
			nodes: small(map[string]time.Time{"gone": testNow}),
			want:  lostPlan{ReplaceLost: []string{"web-2"}},
		},
		"no pod of a reachable node is replaced, whatever its state": {
			ps:    ps,
			pods:  []corev1.Pod{pod(0, "good").obj(), pod(1, "good").running().obj(), pod(2, "good").running().terminating().obj()},
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{},
		},
		"field off: pods of lost nodes stay": {
			ps:    makePodSet("web").Replicas(3).Obj(),
			pods:  []corev1.Pod{pod(0, "good").obj(), pod(1, "gone").running().obj(), pod(2, "gone").running().terminating().obj()},
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{},
		},
		"an unscheduled pod is on no node": {
			ps:    ps,
			pods:  append(healthy(0, 1), makePod("web-2").controlledBy(ps).hash(h).obj()),
			nodes: small(map[string]time.Time{"": lostLong}),
			want:  lostPlan{},
		},
		"a pod the PodSet does not control is never replaced": {
			ps:    ps,
			pods:  append(healthy(0, 1), makePod("web-2").controlledByOther("other-uid").ready().on("gone").obj()),
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{},
		},
		"budget: at most maxUnavailable (1) pods at once, lowest ordinal first": {
			ps:    ps,
			pods:  []corev1.Pod{pod(0, "good").obj(), pod(1, "gone").running().obj(), pod(2, "gone").running().terminating().obj()},
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{ReplaceLost: []string{"web-1"}},
		},
		"budget: maxUnavailable 2 replaces two at once": {
			ps:    makePodSet("web").Replicas(3).LostNodeAfter(after).MaxUnavailableOf(intstr.FromInt32(2)).Obj(),
			pods:  []corev1.Pod{pod(0, "gone").running().obj(), pod(1, "gone").obj(), pod(2, "gone").obj()},
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{ReplaceLost: []string{"web-0", "web-1"}},
		},
		"budget: a replacement not yet available holds the next one back": {
			ps:    ps,
			pods:  []corev1.Pod{pod(0, "good").obj(), pod(1, "good").running().obj(), pod(2, "gone").running().obj()},
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{},
		},
		"budget: a missing pod is created and holds the replacement back": {
			ps:    ps,
			pods:  []corev1.Pod{pod(0, "good").obj(), pod(2, "gone").running().obj()},
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{Create: []int{1}},
		},
		"budget: pods of nodes lost for less than afterSeconds do not hold it": {
			ps: ps,
			pods: []corev1.Pod{pod(0, "good").obj(), pod(1, "recent").running().obj(),
				pod(2, "gone").running().obj()},
			nodes: small(map[string]time.Time{"gone": lostLong, "recent": testNow.Add(-10 * time.Second)}),
			want:  lostPlan{ReplaceLost: []string{"web-2"}, Wake: 51 * time.Second},
		},
		"more than half the cluster's nodes lost: paused, looked at again": {
			ps:    ps,
			pods:  append(healthy(0, 1), pod(2, "gone").running().obj()),
			nodes: Nodes{Lost: map[string]time.Time{"gone": lostLong}, LostInCluster: 6, Total: 11},
			want:  lostPlan{LostHeld: []string{"web-2"}, Wake: pausedRecheck},
		},
		"half the cluster's nodes lost (one of two): replaced": {
			ps:    ps,
			pods:  append(healthy(0, 1), pod(2, "gone").running().obj()),
			nodes: Nodes{Lost: map[string]time.Time{"gone": lostLong}, LostInCluster: 1, Total: 2},
			want:  lostPlan{ReplaceLost: []string{"web-2"}},
		},
		"the only node lost: paused": {
			ps:    makePodSet("web").Replicas(1).LostNodeAfter(after).Obj(),
			pods:  []corev1.Pod{pod(0, "gone").running().obj()},
			nodes: Nodes{Lost: map[string]time.Time{"gone": lostLong}, LostInCluster: 1, Total: 1},
			want:  lostPlan{LostHeld: []string{"web-0"}, Wake: pausedRecheck},
		},
		"an out-of-date pod on a lost node is replaced, not rolled out": {
			ps: ps,
			pods: append(healthy(0, 1),
				makePod("web-2").controlledBy(ps).running().hash("stale").on("gone").obj()),
			nodes: small(map[string]time.Time{"gone": lostLong}),
			want:  lostPlan{ReplaceLost: []string{"web-2"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := deepCopyPods(tc.pods)
			v := NewView(tc.ps, NewRevisions(tc.ps, nil), tc.pods, testNow)
			v.Nodes = tc.nodes
			p := v.Plan(Input{InFlight: noneInFlight})
			names := func(pods []*corev1.Pod) []string {
				var out []string
				for _, pod := range pods {
					out = append(out, pod.Name)
				}
				return out
			}
			got := lostPlan{ReplaceLost: names(p.ReplaceLost), LostHeld: names(p.LostHeld), Create: p.Create, Rollout: names(p.Rollout), Wake: p.Wake}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for _, pod := range p.ReplaceLost {
				if _, ok := p.LostSince[pod.Spec.NodeName]; !ok {
					t.Errorf("the plan does not say since when node %s of pod %s is lost", pod.Spec.NodeName, pod.Name)
				}
			}
			if diff := cmp.Diff(before, tc.pods); diff != "" {
				t.Errorf("the plan modified its pods (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPlanSkipsLostPodsWithWritesInFlight(t *testing.T) {
	ps := makePodSet("web").Replicas(1).LostNodeAfter(0).Obj()
	pods := []corev1.Pod{makePod("web-0").controlledBy(ps).running().hash(TemplateHash(ps)).on("gone").obj()}
	v := NewView(ps, NewRevisions(ps, nil), pods, testNow)
	v.Nodes = Nodes{Lost: map[string]time.Time{"gone": testNow.Add(-time.Hour)}, LostInCluster: 1, Total: 3}
	if p := v.Plan(Input{InFlight: inFlightNames("web-0")}); len(p.ReplaceLost) != 0 {
		t.Errorf("replaced %d pods with a write in flight, want none", len(p.ReplaceLost))
	}
}

func TestStatusCountsLostNodeReplacements(t *testing.T) {
	ps := makePodSet("web").Replicas(2).LostNodeAfter(0).Obj()
	ps.Status.LostNodeReplacements = 3
	h := TemplateHash(ps)
	pods := []corev1.Pod{
		makePod("web-0").controlledBy(ps).ready().hash(h).on("good").obj(),
		makePod("web-1").controlledBy(ps).running().hash(h).on("gone").terminating().obj(),
	}
	v := NewView(ps, NewRevisions(ps, nil), pods, testNow)
	v.Nodes = Nodes{Lost: map[string]time.Time{"gone": testNow.Add(-time.Hour)}, LostInCluster: 1, Total: 3}
	plan := v.Plan(Input{InFlight: noneInFlight})
	status := v.Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
	if status.LostNodeReplacements != 4 {
		t.Errorf("status.lostNodeReplacements = %d, want 4 (3 before, 1 this pass)", status.LostNodeReplacements)
	}
	if !SignificantChange(ps.Status, status) {
		t.Error("a new lost-node replacement is not written at once: a deferred write would lose it")
	}
	again := NewView(ps, NewRevisions(ps, nil), pods[:1], testNow)
	plan = again.Plan(Input{InFlight: noneInFlight})
	if got := again.Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost}).LostNodeReplacements; got != 3 {
		t.Errorf("a pass without replacements: status.lostNodeReplacements = %d, want 3 carried over", got)
	}
}

func TestNodeLostSince(t *testing.T) {
	t1 := metav1.NewTime(testNow.Add(-time.Minute))
	t2 := metav1.NewTime(testNow.Add(-time.Hour))
	ready := func(s corev1.ConditionStatus, at metav1.Time) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s, LastTransitionTime: at}
	}
	unreachable := func(at metav1.Time) corev1.Taint {
		return corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at}
	}
	cases := map[string]struct {
		node      corev1.Node
		wantLost  bool
		wantSince time.Time
	}{
		"Ready":                            {node: corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, t2)}}}},
		"no Ready condition yet (joining)": {},
		"Ready Unknown: lost since the transition": {
			node:     corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionUnknown, t1)}}},
			wantLost: true, wantSince: t1.Time,
		},
		"Ready False (NotReady)": {
			node:     corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, t1)}}},
			wantLost: true, wantSince: t1.Time,
		},
		"unreachable taint on a node still shown Ready": {
			node: corev1.Node{
				Spec:   corev1.NodeSpec{Taints: []corev1.Taint{unreachable(t1)}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, t2)}},
			},
			wantLost: true, wantSince: t1.Time,
		},
		"taint and condition: the earlier": {
			node: corev1.Node{
				Spec:   corev1.NodeSpec{Taints: []corev1.Taint{unreachable(t2)}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionUnknown, t1)}},
			},
			wantLost: true, wantSince: t2.Time,
		},
		"other taints do not count": {
			node: corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			since, lost := NodeLostSince(&tc.node)
			if lost != tc.wantLost || !since.Equal(tc.wantSince) {
				t.Errorf("NodeLostSince() = %v, %v; want %v, %v", since, lost, tc.wantSince, tc.wantLost)
			}
			slim, _ := SlimNode(tc.node.DeepCopy())
			if s, l := NodeLostSince(slim.(*corev1.Node)); l != lost || !s.Equal(since) {
				t.Errorf("NodeLostSince(SlimNode()) = %v, %v; want %v, %v as of the whole node", s, l, since, lost)
			}
		})
	}
}
