package podset

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
)

// testNamespace is the namespace of every fixture.
const testNamespace = "demo"

// makePodSet is the fixture PodSet of the core's tests, as the cache
// would show it: a UID and generation 1, one hardened-enough container, a
// labelled template with one annotation and the defaults the schema
// applies.
func makePodSet(name string) *fixture.PodSetBuilder {
	return fixture.PodSet(testNamespace, name).UID(types.UID(name + "-uid")).Generation(1).Template(corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"tier": "web"},
			Annotations: map[string]string{"example.com/note": "kept"},
		},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)},
			Containers:      []corev1.Container{{Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}},
		},
	}).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.Type = podsetv1alpha1.RollingUpdateStrategyType
	})
}

// podBuilder builds pod fixtures as the cache would show them:
// makePod("web-2").controlledBy(ps).ready().hash(h).obj().
type podBuilder struct{ pod corev1.Pod }

// makePod is a Pending pod with no labels and no owner.
func makePod(name string) *podBuilder {
	return &podBuilder{pod: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid")},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

// controlledBy makes the pod what the operator would have made for ps: its
// controller reference, the operator's name and ordinal labels, the
// template's labels and annotations and its images. The template hash is
// set separately, with hash.
func (b *podBuilder) controlledBy(ps *podsetv1alpha1.PodSet) *podBuilder {
	b.pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: podsetv1alpha1.GroupVersion.String(), Kind: "PodSet", Name: ps.Name, UID: ps.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	for k, v := range ps.Spec.Template.Labels {
		b.label(k, v)
	}
	b.label(podsetv1alpha1.NameLabel, ps.Name)
	if ordinal, ok := PodOrdinal(ps.Name, b.pod.Name); ok {
		b.label(podsetv1alpha1.OrdinalLabel, strconv.Itoa(ordinal))
	}
	for k, v := range ps.Spec.Template.Annotations {
		if b.pod.Annotations == nil {
			b.pod.Annotations = map[string]string{}
		}
		b.pod.Annotations[k] = v
	}
	b.pod.Spec.Containers = append([]corev1.Container(nil), ps.Spec.Template.Spec.Containers...)
	b.pod.Spec.InitContainers = append([]corev1.Container(nil), ps.Spec.Template.Spec.InitContainers...)
	return b
}

// controlledByOther gives the pod another controller with the given UID.
func (b *podBuilder) controlledByOther(uid types.UID) *podBuilder {
	b.pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "other", UID: uid, Controller: ptr.To(true),
	}}
	return b
}

func (b *podBuilder) label(k, v string) *podBuilder {
	if b.pod.Labels == nil {
		b.pod.Labels = map[string]string{}
	}
	b.pod.Labels[k] = v
	return b
}

func (b *podBuilder) withoutLabel(k string) *podBuilder {
	delete(b.pod.Labels, k)
	return b
}

func (b *podBuilder) withoutAnnotation(k string) *podBuilder {
	delete(b.pod.Annotations, k)
	return b
}

func (b *podBuilder) hash(h string) *podBuilder {
	return b.label(podsetv1alpha1.TemplateHashLabel, h)
}

func (b *podBuilder) image(container, image string) *podBuilder {
	for i := range b.pod.Spec.Containers {
		if b.pod.Spec.Containers[i].Name == container {
			b.pod.Spec.Containers[i].Image = image
		}
	}
	for i := range b.pod.Spec.InitContainers {
		if b.pod.Spec.InitContainers[i].Name == container {
			b.pod.Spec.InitContainers[i].Image = image
		}
	}
	return b
}

func (b *podBuilder) blockOwnerDeletion(block bool) *podBuilder {
	for i := range b.pod.OwnerReferences {
		b.pod.OwnerReferences[i].BlockOwnerDeletion = ptr.To(block)
	}
	return b
}

// ready makes the pod Running with a Ready condition that is True.
func (b *podBuilder) ready() *podBuilder {
	b.pod.Status.Phase = corev1.PodRunning
	b.pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return b
}

// running makes the pod Running with a Ready condition that is False.
func (b *podBuilder) running() *podBuilder {
	b.pod.Status.Phase = corev1.PodRunning
	b.pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	return b
}

func (b *podBuilder) phase(p corev1.PodPhase) *podBuilder {
	b.pod.Status.Phase = p
	return b
}

func (b *podBuilder) terminating() *podBuilder {
	b.pod.DeletionTimestamp = ptr.To(metav1.Unix(1_700_000_000, 0))
	b.pod.Finalizers = []string{"example.com/hold"}
	return b
}

func (b *podBuilder) obj() corev1.Pod {
	return *b.pod.DeepCopy()
}

// deepCopyPods copies pods, to check later that a function left them alone.
func deepCopyPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		out = append(out, *pods[i].DeepCopy())
	}
	return out
}

// readyPodsOf is the pods of these ordinals of the PodSet "web", in that
// order: controlled by ps, ready, of template hash.
func readyPodsOf(ps *podsetv1alpha1.PodSet, hash string, ordinals ...int) []corev1.Pod {
	var pods []corev1.Pod
	for _, o := range ordinals {
		pods = append(pods, makePod(PodName("web", o)).controlledBy(ps).ready().hash(hash).obj())
	}
	return pods
}

// noneInFlight is an inFlight func for a cache that has caught up.
func noneInFlight(string) bool { return false }

// inFlightNames is an inFlight func that reports the given names.
func inFlightNames(names ...string) func(string) bool {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return func(name string) bool { return set[name] }
}

// planNames is a podPlan reduced to names and ordinals, so that whole plans
// compare with cmp.Diff.
type planNames struct {
	Create          []int
	Repair          []string
	Prune           []string
	ReplaceFinished []string
	Rollout         []string
	ReplaceLost     []string
	Conflicts       []string
	Strays          []string
	// Empty is plan.empty(): the pass sends no write.
	Empty bool
}

func namesOf(p Plan) planNames {
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, pod := range pods {
			out = append(out, pod.Name)
		}
		return out
	}
	return planNames{
		Create:          p.Create,
		Repair:          names(p.Repair),
		Prune:           names(p.Prune),
		ReplaceFinished: names(p.ReplaceFinished),
		Rollout:         names(p.Rollout),
		ReplaceLost:     names(p.ReplaceLost),
		Conflicts:       p.Conflicts,
		Strays:          p.Strays,
		Empty:           p.Empty(),
	}
}

func TestPlanPods(t *testing.T) {
	ps3 := makePodSet("web").Replicas(3).Obj()
	h := TemplateHash(ps3)
	const stale = "stale-hash"
	psInit := makePodSet("web").InitContainer("init", "busybox:1.36").Obj()

	// readyPods is the pods of these ordinals, controlled by ps, ready and
	// current.
	readyPods := func(ps *podsetv1alpha1.PodSet, ordinals ...int) []corev1.Pod {
		return readyPodsOf(ps, TemplateHash(ps), ordinals...)
	}
	// stalePods is the pods of these ordinals, controlled by ps3, ready and
	// of a stale template.
	stalePods := func(ordinals ...int) []corev1.Pod { return readyPodsOf(ps3, stale, ordinals...) }

	type planCase struct {
		ps       *podsetv1alpha1.PodSet
		pods     []corev1.Pod
		inFlight func(string) bool
		want     planNames
	}
	cases := map[string]planCase{
		"no pods: create every ordinal": {
			ps:   ps3,
			want: planNames{Create: []int{0, 1, 2}},
		},
		"some pods: create only the missing ordinals": {
			ps:   ps3,
			pods: readyPods(ps3, 0, 2),
			want: planNames{Create: []int{1}},
		},
		"scale down: prune from the highest ordinal, compared as numbers": {
			ps:   makePodSet("web").Replicas(2).Obj(),
			pods: readyPods(makePodSet("web").Replicas(2).Obj(), 9, 0, 10, 2, 1),
			want: planNames{Prune: []string{"web-10", "web-9", "web-2"}},
		},
		"controlled pods with names that have no ordinal are pruned first": {
			ps: ps3,
			pods: append(readyPods(ps3, 0, 1, 2, 4),
				makePod("web-01").controlledBy(ps3).ready().hash(h).obj()),
			want: planNames{Prune: []string{"web-01", "web-4"}},
		},
		"a controlled pod named web-x is pruned": {
			ps:   ps3,
			pods: append(readyPods(ps3, 0, 1, 2), makePod("web-x").controlledBy(ps3).hash(h).obj()),
			want: planNames{Prune: []string{"web-x"}},
		},
		"replicas 0: prune every pod": {
			ps:   makePodSet("web").Replicas(0).Obj(),
			pods: readyPods(ps3, 0, 1, 2),
			want: planNames{Prune: []string{"web-2", "web-1", "web-0"}},
		},
		"terminating pods are waited out: neither created nor pruned": {
			ps: makePodSet("web").Replicas(2).Obj(),
			pods: []corev1.Pod{
				makePod("web-0").controlledBy(ps3).ready().hash(h).obj(),
				makePod("web-1").controlledBy(ps3).ready().hash(h).terminating().obj(),
				makePod("web-3").controlledBy(ps3).ready().hash(h).terminating().obj(),
			},
			want: planNames{Empty: true},
		},
		"a terminating stale pod is not rolled out again": {
			ps: ps3,
			pods: append(readyPods(ps3, 0, 1),
				makePod("web-2").controlledBy(ps3).running().hash(stale).terminating().obj()),
			want: planNames{Empty: true},
		},
		"Failed and Succeeded pods are replaced, beyond replicas they are pruned": {
			ps: ps3,
			pods: []corev1.Pod{
				makePod("web-0").controlledBy(ps3).phase(corev1.PodFailed).hash(h).obj(),
				makePod("web-1").controlledBy(ps3).ready().hash(h).obj(),
				makePod("web-2").controlledBy(ps3).phase(corev1.PodSucceeded).hash(stale).obj(),
				makePod("web-3").controlledBy(ps3).phase(corev1.PodFailed).hash(h).obj(),
			},
			want: planNames{ReplaceFinished: []string{"web-0", "web-2"}, Prune: []string{"web-3"}},
		},
		"foreign pods holding needed names are conflicts and never written": {
			ps: ps3,
			pods: []corev1.Pod{
				makePod("web-0").label(podsetv1alpha1.NameLabel, "web").phase(corev1.PodFailed).obj(),
				makePod("web-1").ready().hash(h).obj(),
				makePod("web-2").controlledByOther("someone-else").label(podsetv1alpha1.NameLabel, "web").running().hash(stale).obj(),
			},
			want: planNames{Conflicts: []string{"web-0", "web-1", "web-2"}, Empty: true},
		},
		"a pod owned but not controlled by the PodSet is foreign": {
			ps: ps3,
			pods: append(readyPods(ps3, 0, 1), func() corev1.Pod {
				p := makePod("web-2").controlledBy(ps3).ready().hash(stale).obj()
				p.OwnerReferences[0].Controller = ptr.To(false)
				return p
			}()),
			want: planNames{Conflicts: []string{"web-2"}, Empty: true},
		},
		"foreign pods with the PodSet label outside the ordinals are strays and never pruned": {
			ps: ps3,
			pods: append(readyPods(ps3, 0, 1, 2),
				makePod("web-7").label(podsetv1alpha1.NameLabel, "web").ready().obj(),
				makePod("web-abc").controlledByOther("someone-else").label(podsetv1alpha1.NameLabel, "web").obj()),
			want: planNames{Strays: []string{"web-7", "web-abc"}, Empty: true},
		},
		"pods with writes in flight are neither created nor deleted": {
			ps: ps3,
			pods: []corev1.Pod{
				makePod("web-0").controlledBy(ps3).ready().hash(stale).obj(),
				makePod("web-4").controlledBy(ps3).ready().hash(h).obj(),
				makePod("web-x").controlledBy(ps3).hash(h).obj(),
			},
			inFlight: inFlightNames("web-0", "web-1", "web-4", "web-x"),
			want:     planNames{Create: []int{2}},
		},
		"rolling update, maxUnavailable 1, all ready and stale: only the highest ordinal": {
			ps:   ps3,
			pods: stalePods(0, 1, 2),
			want: planNames{Rollout: []string{"web-2"}},
		},
		"stale unready pods go first, all of them, and take no ready pod over budget": {
			ps: makePodSet("web").Replicas(4).Obj(),
			pods: []corev1.Pod{
				makePod("web-0").controlledBy(ps3).ready().hash(stale).obj(),
				makePod("web-1").controlledBy(ps3).running().hash(stale).obj(),
				makePod("web-2").controlledBy(ps3).ready().hash(stale).obj(),
				makePod("web-3").controlledBy(ps3).hash(stale).obj(),
			},
			want: planNames{Rollout: []string{"web-1", "web-3"}},
		},
		"stale unready pods first, then ready ones from the highest while the budget lasts": {
			ps: makePodSet("web").Replicas(4).MaxUnavailableOf(intstr.FromInt32(3)).Obj(),
			pods: []corev1.Pod{
				makePod("web-0").controlledBy(ps3).ready().hash(stale).obj(),
				makePod("web-1").controlledBy(ps3).running().hash(stale).obj(),
				makePod("web-2").controlledBy(ps3).ready().hash(stale).obj(),
				makePod("web-3").controlledBy(ps3).hash(stale).obj(),
			},
			want: planNames{Rollout: []string{"web-1", "web-3", "web-2"}},
		},
		"an unready current pod uses up the budget": {
			ps:   ps3,
			pods: append([]corev1.Pod{makePod("web-0").controlledBy(ps3).running().hash(h).obj()}, stalePods(1, 2)...),
			want: planNames{Empty: true},
		},
		"a missing pod uses up the budget": {
			ps:   ps3,
			pods: stalePods(1, 2),
			want: planNames{Create: []int{0}},
		},
		"a foreign pod holding a name uses up the budget": {
			ps:   ps3,
			pods: append([]corev1.Pod{makePod("web-0").ready().obj()}, stalePods(1, 2)...),
			want: planNames{Conflicts: []string{"web-0"}, Empty: true},
		},
		"maxUnavailable 2": {
			ps:   makePodSet("web").Replicas(4).MaxUnavailableOf(intstr.FromInt32(2)).Obj(),
			pods: stalePods(0, 1, 2, 3),
			want: planNames{Rollout: []string{"web-3", "web-2"}},
		},
		"maxUnavailable 50% of 5 rounds down to 2": {
			ps:   makePodSet("web").Replicas(5).MaxUnavailableOf(intstr.FromString("50%")).Obj(),
			pods: stalePods(0, 1, 2, 3, 4),
			want: planNames{Rollout: []string{"web-4", "web-3"}},
		},
		"maxUnavailable 50% of 1 is still 1": {
			ps:   makePodSet("web").Replicas(1).MaxUnavailableOf(intstr.FromString("50%")).Obj(),
			pods: stalePods(0),
			want: planNames{Rollout: []string{"web-0"}},
		},
		"OnDelete never rolls out": {
			ps: makePodSet("web").Replicas(3).OnDelete().Obj(),
			pods: []corev1.Pod{
				makePod("web-0").controlledBy(ps3).ready().hash(stale).obj(),
				makePod("web-1").controlledBy(ps3).running().hash(stale).obj(),
				makePod("web-2").controlledBy(ps3).ready().hash(stale).obj(),
			},
			want: planNames{Empty: true},
		},
		"OnDelete still creates, prunes and replaces finished pods": {
			ps: makePodSet("web").Replicas(3).OnDelete().Obj(),
			pods: []corev1.Pod{
				makePod("web-1").controlledBy(ps3).phase(corev1.PodFailed).hash(stale).obj(),
				makePod("web-2").controlledBy(ps3).ready().hash(stale).obj(),
				makePod("web-5").controlledBy(ps3).ready().hash(stale).obj(),
			},
			want: planNames{Create: []int{0}, ReplaceFinished: []string{"web-1"}, Prune: []string{"web-5"}},
		},
		"drift: a changed init container image is repaired": {
			ps:   psInit,
			pods: []corev1.Pod{makePod("web-0").controlledBy(psInit).ready().hash(TemplateHash(psInit)).image("init", "busybox:evil").obj()},
			want: planNames{Repair: []string{"web-0"}},
		},
		"drift on a pod with a write in flight waits for the cache": {
			ps:       ps3,
			pods:     append(readyPods(ps3, 1, 2), makePod("web-0").controlledBy(ps3).ready().hash(h).image("app", "busybox:evil").obj()),
			inFlight: inFlightNames("web-0"),
			want:     planNames{Empty: true},
		},
		"labels and annotations added by someone else are not drift": {
			ps: ps3,
			pods: func() []corev1.Pod {
				pods := readyPods(ps3, 0, 1)
				p := makePod("web-2").controlledBy(ps3).ready().hash(h).label("team", "payments").obj()
				p.Annotations["argocd.argoproj.io/tracking-id"] = "x"
				return append(pods, p)
			}(),
			want: planNames{Empty: true},
		},
		"a converged set sends nothing": {
			ps:   ps3,
			pods: readyPods(ps3, 2, 0, 1),
			want: planNames{Empty: true},
		},
		"a converged set of unready current pods sends nothing": {
			ps: ps3,
			pods: []corev1.Pod{
				makePod("web-0").controlledBy(ps3).hash(h).obj(),
				makePod("web-1").controlledBy(ps3).running().hash(h).obj(),
				makePod("web-2").controlledBy(ps3).ready().hash(h).obj(),
			},
			want: planNames{Empty: true},
		},
	}
	// Drift on one of ps3's three ready, current pods is repaired, and
	// only there.
	for name, d := range map[string]struct {
		ordinal int
		drift   func(*podBuilder) *podBuilder
	}{
		"a missing operator label is repaired":      {2, func(p *podBuilder) *podBuilder { return p.withoutLabel(podsetv1alpha1.OrdinalLabel) }},
		"a wrong ordinal label is repaired":         {2, func(p *podBuilder) *podBuilder { return p.label(podsetv1alpha1.OrdinalLabel, "7") }},
		"a changed template label is repaired":      {1, func(p *podBuilder) *podBuilder { return p.label("tier", "db") }},
		"a missing template annotation is repaired": {0, func(p *podBuilder) *podBuilder { return p.withoutAnnotation("example.com/note") }},
		"blockOwnerDeletion false is repaired":      {0, func(p *podBuilder) *podBuilder { return p.blockOwnerDeletion(false) }},
		"a changed container image is repaired":     {0, func(p *podBuilder) *podBuilder { return p.image("app", "busybox:evil") }},
	} {
		var others []int
		for o := range 3 {
			if o != d.ordinal {
				others = append(others, o)
			}
		}
		podName := "web-" + strconv.Itoa(d.ordinal)
		cases["drift: "+name] = planCase{
			ps:   ps3,
			pods: append(readyPods(ps3, others...), d.drift(makePod(podName).controlledBy(ps3).ready().hash(h)).obj()),
			want: planNames{Repair: []string{podName}},
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inFlight := tc.inFlight
			if inFlight == nil {
				inFlight = noneInFlight
			}
			before := deepCopyPods(tc.pods)
			got := namesOf(NewView(tc.ps, NewRevisions(tc.ps, nil), tc.pods, testNow).Plan(Input{InFlight: inFlight}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("planPods() (-want +got):\n%s", diff)
			}
			// The pods come from the cache and are shared with it.
			if diff := cmp.Diff(before, tc.pods); diff != "" {
				t.Errorf("planPods() modified its pods (-before +after):\n%s", diff)
			}
		})
	}
}

// testNow is the time of every pure test's pass.
var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// planArgs is a pass's plan input with the revisions and time its view
// is made with.
type planArgs struct {
	Input
	Revs *Revisions
	Now  time.Time
}

// testInput is a pass's input with only the current template's revision
// known, nothing remembered, the given writes in flight, at testNow.
func testInput(ps *podsetv1alpha1.PodSet, inFlight func(string) bool) planArgs {
	return planArgs{
		Input: Input{InFlight: inFlight},
		Revs:  NewRevisions(ps, nil),
		Now:   testNow,
	}
}

// TestPlanPodsDesiredPodIsConverged checks that a pod built by desiredPod,
// as the API server would store it, is not seen as drifted: otherwise every
// pass would send a write.
func TestPlanPodsDesiredPodIsConverged(t *testing.T) {
	cases := map[string]struct {
		ps *podsetv1alpha1.PodSet
	}{
		"default fixture": {ps: makePodSet("web").Replicas(2).Obj()},
		"with an init container": {
			ps: makePodSet("web").Replicas(2).InitContainer("init", "busybox:1.36").Obj(),
		},
		"template labels with the operator's keys": {
			ps: makePodSet("web").Replicas(2).
				TemplateLabel(podsetv1alpha1.NameLabel, "other").
				TemplateLabel(podsetv1alpha1.TemplateHashLabel, "forged").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hash := TemplateHash(tc.ps)
			var pods []corev1.Pod
			for ordinal := range int(Replicas(tc.ps)) {
				pods = append(pods, storedPod(t, tc.ps, ordinal, hash))
			}
			got := namesOf(NewView(tc.ps, NewRevisions(tc.ps, nil), pods, testNow).Plan(Input{InFlight: noneInFlight}))
			if diff := cmp.Diff(planNames{Empty: true}, got); diff != "" {
				t.Errorf("planPods() on the desired pods (-want +got):\n%s", diff)
			}
		})
	}
}

// storedPod is the desired pod of an ordinal as the cache would show it
// once created and ready.
func storedPod(t testing.TB, ps *podsetv1alpha1.PodSet, ordinal int, hash string) corev1.Pod {
	t.Helper()
	ac, err := PodFromTemplate(ps, &ps.Spec.Template, ordinal, hash)
	if err != nil {
		t.Fatalf("desiredPod() error = %v", err)
	}
	var pod corev1.Pod
	if err := Convert(ac, &pod); err != nil {
		t.Fatalf("converting the desired pod: %v", err)
	}
	pod.UID = types.UID(pod.Name + "-uid")
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if hasGate(&pod) {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue})
	}
	return pod
}

func TestMaxUnavailable(t *testing.T) {
	cases := map[string]struct {
		replicas int32
		value    *intstr.IntOrString
		want     int
	}{
		"unset is 1":                {replicas: 10, want: 1},
		"an integer":                {replicas: 10, value: ptr.To(intstr.FromInt32(3)), want: 3},
		"an integer above replicas": {replicas: 2, value: ptr.To(intstr.FromInt32(5)), want: 5},
		"50% of 5 rounds down":      {replicas: 5, value: ptr.To(intstr.FromString("50%")), want: 2},
		"50% of 10":                 {replicas: 10, value: ptr.To(intstr.FromString("50%")), want: 5},
		"10% of 4 is at least 1":    {replicas: 4, value: ptr.To(intstr.FromString("10%")), want: 1},
		"100% of 7":                 {replicas: 7, value: ptr.To(intstr.FromString("100%")), want: 7},
		"any percentage of 0 is 1":  {replicas: 0, value: ptr.To(intstr.FromString("100%")), want: 1},
		"an invalid string is 1":    {replicas: 4, value: ptr.To(intstr.FromString("lots")), want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := makePodSet("web").Replicas(tc.replicas)
			if tc.value != nil {
				b.MaxUnavailableOf(*tc.value)
			}
			if got := maxUnavailable(b.Obj()); got != tc.want {
				t.Errorf("maxUnavailable() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPodReady(t *testing.T) {
	cases := map[string]struct {
		pod  corev1.Pod
		want bool
	}{
		"running and ready":     {pod: makePod("web-0").ready().obj(), want: true},
		"running, not ready":    {pod: makePod("web-0").running().obj()},
		"running, no condition": {pod: makePod("web-0").phase(corev1.PodRunning).obj()},
		"pending":               {pod: makePod("web-0").obj()},
		"succeeded with a stale Ready condition": {
			pod: makePod("web-0").ready().phase(corev1.PodSucceeded).obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := podReady(&tc.pod); got != tc.want {
				t.Errorf("podReady() = %v, want %v", got, tc.want)
			}
		})
	}
}
