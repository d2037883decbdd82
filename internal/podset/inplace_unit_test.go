package podset

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func TestUpdateWayFor(t *testing.T) {
	cpu := func(limit string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}}
	}
	gated := makePod("web-0").obj()
	gated.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
	ungated := makePod("web-0").obj()
	cases := map[string]struct {
		change  func(*corev1.PodTemplateSpec)
		both    func(*corev1.PodTemplateSpec)
		policy  podsetv1alpha1.PodUpdatePolicy
		pod     *corev1.Pod
		unknown bool
		want    UpdateWay
	}{
		"labels and annotations": {
			change: func(t *corev1.PodTemplateSpec) { t.Labels["x"] = "y"; t.Annotations = map[string]string{"a": "b"} },
			want:   UpdateWay{InPlace: true},
		},
		"a restart asked for": {
			change: func(t *corev1.PodTemplateSpec) {
				t.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-23T14:00:00Z"}
			},
			want: UpdateWay{Why: whyRestart},
		},
		"an image": {
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "busybox:1.37" },
			want:   UpdateWay{InPlace: true, Images: []string{"app"}, Restarts: []string{"app"}},
		},
		"an image, without the gate": {
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "busybox:1.37" },
			pod:    &ungated,
			want:   UpdateWay{Why: whyNoGate},
		},
		"cpu": {
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Resources = cpu("2") },
			want:   UpdateWay{InPlace: true, Resize: true},
		},
		"cpu, which the container restarts for": {
			both: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
			},
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Resources = cpu("2") },
			want:   UpdateWay{InPlace: true, Resize: true, Restarts: []string{"app"}},
		},
		"a resize policy": {
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
			},
			want: UpdateWay{Why: whyTemplate},
		},
		"ephemeral storage": {
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}
			},
			want: UpdateWay{Why: whyTemplate},
		},
		"ephemeral storage removed, cpu changed": {
			both: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
				}}
			},
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Resources = cpu("2") },
			want:   UpdateWay{Why: whyTemplate},
		},
		"cpu changed, ephemeral storage kept": {
			both: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
				}}
			},
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
			},
			want: UpdateWay{InPlace: true, Resize: true},
		},
		"a cpu limit removed": {
			both:   func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Resources = cpu("1") },
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Resources = corev1.ResourceRequirements{} },
			want:   UpdateWay{Why: whyTemplate},
		},
		"a cpu request added": {
			both: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Resources = cpu("1") },
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			},
			want: UpdateWay{InPlace: true, Resize: true},
		},
		"a command": {
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Command = []string{"true"} },
			want:   UpdateWay{Why: whyTemplate},
		},
		"a container more": {
			change: func(t *corev1.PodTemplateSpec) {
				t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
			},
			want: UpdateWay{Why: whyTemplate},
		},
		"Recreate": {
			change: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "busybox:1.37" },
			policy: podsetv1alpha1.RecreateUpdatePolicy,
			want:   UpdateWay{Why: WhyPolicy},
		},
		"an unknown revision": {
			change:  func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "busybox:1.37" },
			unknown: true,
			want:    UpdateWay{Why: whyUnknown},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			ps.Spec.UpdateStrategy.PodUpdatePolicy = tc.policy
			if tc.both != nil {
				tc.both(&ps.Spec.Template)
			}
			from := ps.Spec.Template.DeepCopy()
			to := ps.Spec.Template.DeepCopy()
			tc.change(to)
			if tc.unknown {
				from = nil
			}
			pod := ptr.To(gated)
			if tc.pod != nil {
				pod = tc.pod
			}
			got := updateWayFor(ps, from, to, pod)
			if got.InPlace != tc.want.InPlace || got.Why != tc.want.Why || got.Restart() != tc.want.Restart() ||
				got.Resize != tc.want.Resize || len(got.Images) != len(tc.want.Images) || !slices.Equal(got.Restarts, tc.want.Restarts) {
				t.Errorf("updateWayFor() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestResizeRestartsPerPolicy(t *testing.T) {
	old := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	c := &corev1.Container{
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		ResizePolicy: []corev1.ContainerResizePolicy{
			{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
			{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
		},
	}
	if resizeRestarts(old, c) {
		t.Errorf("a cpu change restarts the container, whose policy for cpu is NotRequired")
	}
	c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
	if !resizeRestarts(old, c) {
		t.Errorf("a memory change does not restart the container, whose policy for memory is RestartContainer")
	}
}

func TestPodUpdateKeepsWhatARunningPodCannotChange(t *testing.T) {
	ps := makePodSet("web").Obj()
	ps.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}
	pod := makePod("web-0").controlledBy(ps).obj()
	// Resized by the VerticalPodAutoscaler, and made before the gate.
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
	}
	ac, err := PodUpdate(ps, &ps.Spec.Template, &pod, "abc")
	if err != nil {
		t.Fatal(err)
	}
	r := ac.Spec.Containers[0].Resources
	if got := (*r.Requests)[corev1.ResourceCPU]; got.String() != "20m" {
		t.Errorf("cpu request sent %s, want the pod's 20m", got.String())
	}
	if got := (*r.Limits)[corev1.ResourceCPU]; got.String() != "200m" {
		t.Errorf("cpu limit sent %s, want the pod's 200m", got.String())
	}
	if _, ok := (*r.Requests)[corev1.ResourceMemory]; ok {
		t.Errorf("the memory request another writer set is sent: the operator would claim it")
	}
	if len(ac.Spec.ReadinessGates) != 0 {
		t.Errorf("readiness gates %v sent to a pod made without them", ac.Spec.ReadinessGates)
	}
	if ac.UID == nil || *ac.UID != pod.UID {
		t.Errorf("the apply does not name the pod's UID")
	}
}

func TestResizeStuck(t *testing.T) {
	pending := func(reason string, ago time.Duration) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason,
			LastTransitionTime: metav1.NewTime(testNow.Add(-ago)),
		}}}}
	}
	const deadline = 10 * time.Minute
	cases := map[string]struct {
		pod      *corev1.Pod
		wantWhy  string
		wantWait time.Duration
	}{
		"no resize pending":            {pod: &corev1.Pod{}},
		"Infeasible":                   {pod: pending(corev1.PodReasonInfeasible, 0), wantWhy: whyInfeasible},
		"Deferred for a minute":        {pod: pending(corev1.PodReasonDeferred, time.Minute), wantWait: 9 * time.Minute},
		"Deferred past the deadline":   {pod: pending(corev1.PodReasonDeferred, deadline), wantWhy: whyDeferred},
		"Deferred long past the limit": {pod: pending(corev1.PodReasonDeferred, time.Hour), wantWhy: whyDeferred},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			why, wait := resizeStuck(tc.pod, deadline, testNow)
			if why != tc.wantWhy || wait != tc.wantWait {
				t.Errorf("resizeStuck() = %q, %s; want %q, %s", why, wait, tc.wantWhy, tc.wantWait)
			}
		})
	}
}

func TestPodUpdateSendsTheGatesThePodHas(t *testing.T) {
	gate := []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
	for name, tc := range map[string]struct {
		policy podsetv1alpha1.PodUpdatePolicy
		has    []corev1.PodReadinessGate
	}{
		"made with the gate, policy now Recreate":      {policy: podsetv1alpha1.RecreateUpdatePolicy, has: gate},
		"made with the gate, policy InPlaceIfPossible": {policy: podsetv1alpha1.InPlaceIfPossibleUpdatePolicy, has: gate},
		"made without it, policy InPlaceIfPossible":    {policy: podsetv1alpha1.InPlaceIfPossibleUpdatePolicy},
	} {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			ps.Spec.UpdateStrategy.PodUpdatePolicy = tc.policy
			pod := makePod("web-0").controlledBy(ps).obj()
			pod.Spec.ReadinessGates = tc.has
			ac, err := PodUpdate(ps, &ps.Spec.Template, &pod, "abc")
			if err != nil {
				t.Fatal(err)
			}
			var sent []corev1.PodReadinessGate
			for _, g := range ac.Spec.ReadinessGates {
				sent = append(sent, corev1.PodReadinessGate{ConditionType: *g.ConditionType})
			}
			if diff := cmp.Diff(tc.has, sent, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("readiness gates sent to the running pod differ from its own, which the API server refuses (-has +sent):\n%s", diff)
			}
		})
	}
}

func TestPodResizeKeepsWhatTheTemplateDidNotChange(t *testing.T) {
	res := func(cpu, memory string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}
	}
	cases := map[string]struct {
		from, to, pod corev1.ResourceRequirements
		// want is nil for no resize at all.
		want *corev1.ResourceRequirements
	}{
		"cpu changed": {
			from: res("10m", "16Mi"), to: res("20m", "16Mi"), pod: res("10m", "16Mi"),
			want: ptr.To(res("20m", "16Mi")),
		},
		"cpu changed, memory resized by the VerticalPodAutoscaler": {
			from: res("10m", "16Mi"), to: res("20m", "16Mi"), pod: res("10m", "48Mi"),
			want: ptr.To(res("20m", "48Mi")),
		},
		"memory changed by both: the template wins": {
			from: res("10m", "16Mi"), to: res("10m", "64Mi"), pod: res("10m", "48Mi"),
			want: ptr.To(res("10m", "64Mi")),
		},
		"already resized by an earlier pass": {
			from: res("10m", "16Mi"), to: res("20m", "16Mi"), pod: res("20m", "16Mi"),
		},
		"the template changed none": {
			from: res("10m", "16Mi"), to: res("10m", "16Mi"), pod: res("30m", "16Mi"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			from, to := ps.Spec.Template.DeepCopy(), ps.Spec.Template.DeepCopy()
			from.Spec.Containers[0].Resources, to.Spec.Containers[0].Resources = tc.from, tc.to
			pod := makePod("web-0").controlledBy(ps).obj()
			pod.Spec.Containers[0].Resources = tc.pod
			ac := PodResize(ps, from, to, &pod)
			if tc.want == nil {
				if ac != nil {
					t.Fatalf("podResize() = %+v, want no resize", ac.Spec.Containers)
				}
				return
			}
			if ac == nil || len(ac.Spec.Containers) != 1 {
				t.Fatalf("podResize() = %+v, want one container", ac)
			}
			got := corev1.ResourceRequirements{Requests: *ac.Spec.Containers[0].Resources.Requests, Limits: *ac.Spec.Containers[0].Resources.Limits}
			if !equality.Semantic.DeepEqual(got, *tc.want) {
				t.Errorf("resize sends %v, want %v", got, *tc.want)
			}
		})
	}
}

func TestResizeSettled(t *testing.T) {
	cpu := func(q string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	pod := func(spec string, status *corev1.ResourceRequirements, conds ...corev1.PodConditionType) *corev1.Pod {
		p := &corev1.Pod{
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: *cpu(spec)}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Resources: status}}},
		}
		for _, c := range conds {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return p
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"runs what it asks for":                      {pod: pod("20m", cpu("20m")), want: true},
		"the kubelet reports no resources":           {pod: pod("20m", nil), want: true},
		"still runs the old cpu":                     {pod: pod("20m", cpu("10m"))},
		"a resize in progress":                       {pod: pod("20m", cpu("20m"), corev1.PodResizeInProgress)},
		"a resize pending":                           {pod: pod("20m", cpu("10m"), corev1.PodResizePending)},
		"a resize pending, resources reported equal": {pod: pod("20m", cpu("20m"), corev1.PodResizePending)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := resizeSettled(tc.pod); got != tc.want {
				t.Errorf("resizeSettled() = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestRestarted is what a real kubelet reports after an in-place image
// update: containerd names the image by the first of all its tags, or by
// its config digest, so only the restart counts tell that a container
// restarted for the update.
func TestRestarted(t *testing.T) {
	pod := func(image, reported string, restarts int32, running bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{podsetv1alpha1.TemplateHashLabel: "new"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}, {Name: "side", Image: "side:1"}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Image: reported, RestartCount: restarts},
				{Name: "side", Image: "docker.io/library/side:1", RestartCount: 7, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			}},
		}
		if running {
			p.Status.ContainerStatuses[0].State.Running = &corev1.ContainerStateRunning{}
		} else {
			p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		}
		return p
	}
	record := func(p *corev1.Pod, revision string, before int32) *corev1.Pod {
		rec, err := NewRestartRecord(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: before}}}}, revision, []string{"app"})
		if err != nil {
			t.Fatal(err)
		}
		p.Annotations = map[string]string{RestartRecordAnnotation: rec}
		return p
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"restarted on an alias tag, reported by another tag": {
			pod: record(pod("localhost/app:stable", "localhost/app:1.4.2", 3, true), "new", 2), want: true,
		},
		"restarted on a digest, reported by its config digest": {
			pod: record(pod("localhost/app@sha256:aaaa", "sha256:bbbb", 1, true), "new", 0), want: true,
		},
		"not restarted yet, though the reported image matches": {
			pod: record(pod("app:2", "docker.io/library/app:2", 2, true), "new", 2),
		},
		"restarted, not running yet: the container that served is gone": {
			pod: record(pod("app:2", "docker.io/library/app:2", 3, false), "new", 2), want: true,
		},
		"not restarted, not running": {
			pod: record(pod("app:2", "docker.io/library/app:1", 2, false), "new", 2),
		},
		// No record for the pod's revision: nothing was restarted for it
		// (its gate closed for a stop that was called off), so its
		// containers run what it asks for once they run, whatever image
		// name the runtime reports.
		"a record of another revision, running": {
			pod: record(pod("app:2", "docker.io/library/app:1", 3, true), "old", 2), want: true,
		},
		"no record, the reported image matches": {
			pod: pod("app:2", "docker.io/library/app:2", 0, true), want: true,
		},
		"no record, created by an alias tag, the first tag reported": {
			pod: pod("localhost/app:v2", "localhost/app:stable", 0, true), want: true,
		},
		"no record, created by digest, a tag reported": {
			pod: pod("localhost/app@sha256:aaaa", "localhost/app:v1", 0, true), want: true,
		},
		"no record, not running": {
			pod: pod("app:2", "docker.io/library/app:2", 0, false),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := restarted(tc.pod); got != tc.want {
				t.Errorf("restarted() = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestDrainLeft(t *testing.T) {
	now := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	notReadySince := func(ago time.Duration) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-ago)),
		}}}}
	}
	cases := map[string]struct {
		seconds, inPlace *int32
		pod              *corev1.Pod
		seen             time.Time
		want             time.Duration
	}{
		"just not Ready, the default":       {pod: notReadySince(0), want: 4 * time.Second},
		"not Ready for a while":             {pod: notReadySince(time.Minute), want: -56 * time.Second},
		"5 s asked, not Ready for 2 s":      {seconds: ptr.To[int32](5), pod: notReadySince(2 * time.Second), want: 4 * time.Second},
		"0: at once":                        {seconds: ptr.To[int32](0), pod: notReadySince(0), want: 0},
		"the deprecated field, longer":      {seconds: ptr.To[int32](0), inPlace: ptr.To[int32](5), pod: notReadySince(0), want: 6 * time.Second},
		"still Ready: nothing to count yet": {pod: &corev1.Pod{}, want: 0},
		// The condition says 07:00:00, which may be 07:00:00.9; the
		// operator saw it at 07:00:00.3, so it was at most that.
		"seen not Ready 0.3 s into the condition's second": {pod: notReadySince(0), seen: now.Add(300 * time.Millisecond), want: 3300 * time.Millisecond},
		"seen late, after the condition's bound":           {pod: notReadySince(0), seen: now.Add(1500 * time.Millisecond), want: 4 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			ps.Spec.DrainSeconds, ps.Spec.UpdateStrategy.InPlaceDrainSeconds = tc.seconds, tc.inPlace
			if got := drainLeft(ps, tc.pod, tc.seen, now); got != tc.want {
				t.Errorf("drainLeft() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDrainsObserve checks what a pass remembers of drains: a pod seen
// draining for the first time is seen at the pass's time, one seen before
// keeps its time, and pods that do not drain (Ready, gate open, not
// controlled) are dropped.
func TestDrainsObserve(t *testing.T) {
	ps := makePodSet("web").Replicas(4).Obj()
	at := time.Date(2026, 11, 25, 7, 0, 0, 300_000_000, time.UTC)
	earlier := at.Add(-time.Second)
	gate := func(p corev1.Pod, status corev1.ConditionStatus) corev1.Pod {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: status})
		return p
	}
	notReady := func(name string) corev1.Pod {
		p := makePod(name).controlledBy(ps).running().obj()
		p.UID = types.UID(name)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})
		return p
	}
	ready := makePod("web-3").controlledBy(ps).ready().obj()
	ready.UID = "web-3"
	pods := []corev1.Pod{
		gate(notReady("web-0"), corev1.ConditionFalse), // drains, first seen now
		gate(notReady("web-1"), corev1.ConditionFalse), // drains, seen before
		gate(notReady("web-2"), corev1.ConditionTrue),  // gate open: not draining
		gate(ready, corev1.ConditionFalse),             // the kubelet still reports it Ready
	}
	before := Drains{"web-1": earlier, "web-2": earlier, "web-3": earlier, "gone": earlier}
	got := before.Observe(NewView(ps, NewRevisions(ps, nil), pods, at.Truncate(time.Second)), at)
	if want := (Drains{"web-0": at, "web-1": earlier}); !cmp.Equal(got, want) {
		t.Errorf("Observe() = %v, want %v", got, want)
	}
}

// TestResizeRefusedPlan checks what the plan says of a resize the API
// server may refuse, which recreates its pod: a Ready pod that a slice
// lists is drained first, one no slice lists is deleted at once, as any
// pod the operator deletes.
func TestResizeRefusedPlan(t *testing.T) {
	withCPU := func(ps *podsetv1alpha1.PodSet, limit string) *podsetv1alpha1.PodSet {
		ps = ps.DeepCopy()
		ps.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}
		return ps
	}
	v1 := withCPU(makePodSet("web").Replicas(1).Obj(), "1")
	v2 := withCPU(v1, "2")
	h1 := TemplateHash(v1)
	history := []appsv1.ControllerRevision{storedRevision(v1, 1), storedRevision(v2, 2)}
	cases := map[string]struct {
		pod    corev1.Pod
		listed bool
		want   bool
	}{
		"a Ready pod a slice lists: drained first":    {pod: makePod("web-0").controlledBy(v1).ready().gated().hash(h1).obj(), listed: true, want: true},
		"a Ready pod no slice lists: deleted at once": {pod: makePod("web-0").controlledBy(v1).ready().gated().hash(h1).obj()},
		"a Ready pod whose hooks drain it: at once":   {pod: makePod("web-0").controlledBy(v1).ready().gated().preStop().hash(h1).obj(), listed: true},
		"a pod that is not Ready: at once":            {pod: makePod("web-0").controlledBy(v1).running().gated().hash(h1).obj(), listed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := testInput(v2, noneInFlight)
			in.Revs = NewRevisions(v2, history)
			in.Endpoints = Endpoints{}
			if tc.listed {
				in.Endpoints[tc.pod.UID] = EndpointState{Listed: true}
			}
			p := NewView(v2, in.Revs, []corev1.Pod{tc.pod}, in.Now).Plan(in.Input)
			if len(p.Update) != 1 || !p.Update[0].Way.Resize {
				t.Fatalf("the plan updates %v, want web-0 resized", p.Update)
			}
			if got := p.Update[0].DrainIfRefused; got != tc.want {
				t.Errorf("DrainIfRefused %v, want %v", got, tc.want)
			}
		})
	}
}
