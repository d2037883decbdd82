package podset

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func TestPodOrdinal(t *testing.T) {
	cases := map[string]struct {
		podSet, name string
		want         int
		wantOK       bool
	}{
		"ordinal 0":                       {podSet: "web", name: "web-0", want: 0, wantOK: true},
		"ordinal 7":                       {podSet: "web", name: "web-7", want: 7, wantOK: true},
		"ordinal 10":                      {podSet: "web", name: "web-10", want: 10, wantOK: true},
		"the highest ordinal":             {podSet: "web", name: "web-9999", want: 9999, wantOK: true},
		"a PodSet name ending in a digit": {podSet: "web-1", name: "web-1-2", want: 2, wantOK: true},
		"a leading zero":                  {podSet: "web", name: "web-01"},
		"two zeros":                       {podSet: "web", name: "web-00"},
		"an empty ordinal":                {podSet: "web", name: "web-"},
		"no dash":                         {podSet: "web", name: "web"},
		"a letter":                        {podSet: "web", name: "web-x"},
		"a digit then a letter":           {podSet: "web", name: "web-1a"},
		"another PodSet's prefix":         {podSet: "web", name: "webby-1"},
		"a longer PodSet name":            {podSet: "web", name: "web-1-2"},
		"a shorter PodSet name":           {podSet: "web-1", name: "web-2"},
		"a sign":                          {podSet: "web", name: "web-+1"},
		"a negative ordinal":              {podSet: "web", name: "web--1"},
		"a space":                         {podSet: "web", name: "web- 1"},
		"a non-ASCII digit":               {podSet: "web", name: "web-١"},
		"MaxReplicas itself":              {podSet: "web", name: "web-10000"},
		"beyond MaxReplicas":              {podSet: "web", name: "web-123456"},
		"beyond int64":                    {podSet: "web", name: "web-99999999999999999999"},
		"another PodSet":                  {podSet: "web", name: "api-1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := PodOrdinal(tc.podSet, tc.name)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("podOrdinal(%q, %q) = %d, %v; want %d, %v", tc.podSet, tc.name, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestPodNameRoundTrip(t *testing.T) {
	for _, podSet := range []string{"web", "a", "web-1", "x0"} {
		for ordinal := range podsetv1alpha1.MaxReplicas {
			name := PodName(podSet, ordinal)
			if got, ok := PodOrdinal(podSet, name); !ok || got != ordinal {
				t.Fatalf("podOrdinal(%q, podName(%q, %d) = %q) = %d, %v; want %d, true", podSet, podSet, ordinal, name, got, ok, ordinal)
			}
		}
	}
	if got := PodName("web", 12); got != "web-12" {
		t.Errorf("podName(web, 12) = %q, want web-12", got)
	}
}

func TestTemplateHash(t *testing.T) {
	base := makePodSet("web").Replicas(3).Obj()
	h := TemplateHash(base)
	if !regexp.MustCompile(`^[0-9a-z]{1,63}$`).MatchString(h) {
		t.Fatalf("templateHash() = %q, want a valid label value of digits and lower-case letters", h)
	}

	cases := map[string]struct {
		change   func(ps *podsetv1alpha1.PodSet)
		wantSame bool
	}{
		"an equal template built separately": {
			change:   func(ps *podsetv1alpha1.PodSet) { *ps = *makePodSet("web").Replicas(3).Obj() },
			wantSame: true,
		},
		"replicas":                {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](7) }, wantSame: true},
		"the update strategy":     {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.UpdateStrategy.Type = podsetv1alpha1.OnDeleteStrategyType }, wantSame: true},
		"the PodSet's own labels": {change: func(ps *podsetv1alpha1.PodSet) { ps.Labels = map[string]string{"app": "x"} }, wantSame: true},
		"the PodSet's generation": {change: func(ps *podsetv1alpha1.PodSet) { ps.Generation = 9 }, wantSame: true},
		"the PodSet's status":     {change: func(ps *podsetv1alpha1.PodSet) { ps.Status.Replicas = 3 }, wantSame: true},
		"the image":               {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" }},
		"a template label value":  {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Labels["tier"] = "db" }},
		"an added template label": {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Labels["team"] = "a" }},
		"a template annotation":   {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Annotations["example.com/note"] = "new" }},
		"the command":             {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "1"} }},
		"an environment variable": {change: func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}},
		"the pod security context": {change: func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](1000) }},
		"an added init container": {change: func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "x"}}
		}},
		"an added sidecar container": {change: func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.Template.Spec.Containers = append(ps.Spec.Template.Spec.Containers, corev1.Container{Name: "s", Image: "x"})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := base.DeepCopy()
			tc.change(ps)
			got := TemplateHash(ps)
			if tc.wantSame && got != h {
				t.Errorf("templateHash() = %q after changing %s, want it unchanged (%q)", got, name, h)
			}
			if !tc.wantSame && got == h {
				t.Errorf("templateHash() = %q after changing %s, want it to change", got, name)
			}
			if again := TemplateHash(ps); again != got {
				t.Errorf("templateHash() = %q, then %q: not stable", got, again)
			}
		})
	}
}

// ownerRef is the controller reference every pod of the fixture PodSet
// "web" carries.
func ownerRef() *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion("podset.dev/v1alpha1").
		WithKind("PodSet").
		WithName("web").
		WithUID("web-uid").
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// hardenedSecurityContext is the container security context the operator
// sets where the template is silent.
func hardenedSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

// wantPod is the pod of ordinal of the fixture PodSet "web" with hash:
// with templateMeta, it carries the template's label and annotation too.
func wantPod(ordinal, hash string, templateMeta bool) *corev1ac.PodApplyConfiguration {
	labels := map[string]string{
		"podset.dev/name":          "web",
		"podset.dev/ordinal":       ordinal,
		"podset.dev/template-hash": hash,
	}
	pod := corev1ac.Pod("web-"+ordinal, "demo")
	if templateMeta {
		labels["tier"] = "web"
		pod.WithAnnotations(map[string]string{"example.com/note": "kept"})
	}
	return pod.WithLabels(labels).WithOwnerReferences(ownerRef())
}

// wantAppSpec is the spec of a pod from the fixture's template with this
// pod security context: its one container, hardened, and no token.
func wantAppSpec(sc *corev1ac.PodSecurityContextApplyConfiguration) *corev1ac.PodSpecApplyConfiguration {
	return corev1ac.PodSpec().WithReadinessGates(inPlaceGate()).
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(sc).
		WithContainers(corev1ac.Container().
			WithName("app").
			WithImage("busybox:1.36").
			WithCommand("sleep", "3600").
			WithResources(corev1ac.ResourceRequirements()).
			WithLifecycle(drainHook(podsetv1alpha1.DefaultDrainSeconds)).
			WithSecurityContext(hardenedSecurityContext()))
}

// drainHook is the lifecycle the operator gives a container without a
// preStop hook of its own: a sleep of seconds.
func drainHook(seconds int64) *corev1ac.LifecycleApplyConfiguration {
	return corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().WithSleep(corev1ac.SleepAction().WithSeconds(seconds)))
}

// fixtureSecurityContext is the pod security context of the fixture's
// template, as the operator makes it.
func fixtureSecurityContext() *corev1ac.PodSecurityContextApplyConfiguration {
	return corev1ac.PodSecurityContext().
		WithRunAsUser(65532).
		WithRunAsNonRoot(true).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

func TestDesiredPod(t *testing.T) {
	cases := map[string]struct {
		ps      *podsetv1alpha1.PodSet
		ordinal int
		hash    string
		want    *corev1ac.PodApplyConfiguration
	}{
		"the fixture template": {
			ps:      makePodSet("web").Replicas(3).Obj(),
			ordinal: 2,
			hash:    "abc",
			want:    wantPod("2", "abc", true).WithSpec(wantAppSpec(fixtureSecurityContext())),
		},
		"no template labels or annotations, ordinal 10": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := makePodSet("web").Obj()
				ps.Spec.Template.Labels = nil
				ps.Spec.Template.Annotations = nil
				ps.Spec.Template.Spec.SecurityContext = nil
				return ps
			}(),
			ordinal: 10,
			hash:    "h1",
			want: wantPod("10", "h1", false).WithSpec(wantAppSpec(corev1ac.PodSecurityContext().
				WithRunAsNonRoot(true).
				WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))),
		},
		"the operator's labels win over template labels with their keys": {
			ps: makePodSet("web").
				TemplateLabel("podset.dev/name", "other").
				TemplateLabel("podset.dev/ordinal", "99").
				TemplateLabel("podset.dev/template-hash", "forged").Obj(),
			ordinal: 0,
			hash:    "abc",
			want:    wantPod("0", "abc", true).WithSpec(wantAppSpec(fixtureSecurityContext())),
		},
		"explicit template choices are kept, the rest hardened": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := makePodSet("web").Obj()
				ps.Spec.Template.Labels = nil
				ps.Spec.Template.Annotations = nil
				ps.Spec.Template.Spec = corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(true),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/app.json")},
					},
					InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
					Containers: []corev1.Container{
						{
							Name:      "app",
							Image:     "nginx:1.27",
							Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"nginx", "-s", "quit"}}}},
							SecurityContext: &corev1.SecurityContext{
								ReadOnlyRootFilesystem: ptr.To(false),
								Capabilities: &corev1.Capabilities{
									Add:  []corev1.Capability{"NET_BIND_SERVICE"},
									Drop: []corev1.Capability{"NET_RAW"},
								},
							},
						},
						{
							Name:  "sidecar",
							Image: "envoy:1",
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: ptr.To(false),
								ReadOnlyRootFilesystem:   ptr.To(true),
								Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
								SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
							},
						},
					},
				}
				return ps
			}(),
			ordinal: 1,
			hash:    "abc",
			want: wantPod("1", "abc", false).
				WithSpec(corev1ac.PodSpec().WithReadinessGates(inPlaceGate()).
					WithAutomountServiceAccountToken(true).
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithSeccompProfile(corev1ac.SeccompProfile().
							WithType(corev1.SeccompProfileTypeLocalhost).
							WithLocalhostProfile("profiles/app.json"))).
					WithInitContainers(corev1ac.Container().
						WithName("init").
						WithImage("busybox:1.36").
						WithResources(corev1ac.ResourceRequirements()).
						WithSecurityContext(hardenedSecurityContext())).
					WithContainers(
						corev1ac.Container().
							WithName("app").
							WithImage("nginx:1.27").
							WithResources(corev1ac.ResourceRequirements()).
							WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().WithExec(corev1ac.ExecAction().WithCommand("nginx", "-s", "quit")))).
							WithSecurityContext(corev1ac.SecurityContext().
								WithAllowPrivilegeEscalation(false).
								WithReadOnlyRootFilesystem(false).
								WithCapabilities(corev1ac.Capabilities().
									WithAdd("NET_BIND_SERVICE").
									WithDrop("ALL", "NET_RAW"))),
						corev1ac.Container().
							WithName("sidecar").
							WithImage("envoy:1").
							WithResources(corev1ac.ResourceRequirements()).
							WithLifecycle(drainHook(podsetv1alpha1.DefaultDrainSeconds)).
							WithSecurityContext(corev1ac.SecurityContext().
								WithAllowPrivilegeEscalation(false).
								WithReadOnlyRootFilesystem(true).
								WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")).
								WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))))),
		},
		"an explicit RuntimeDefault seccomp profile and runAsNonRoot are kept": {
			ps: func() *podsetv1alpha1.PodSet {
				ps := makePodSet("web").Obj()
				ps.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{
					RunAsNonRoot:   ptr.To(true),
					RunAsUser:      ptr.To[int64](1000),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				}
				ps.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
				return ps
			}(),
			ordinal: 0,
			hash:    "abc",
			want: wantPod("0", "abc", true).WithSpec(wantAppSpec(corev1ac.PodSecurityContext().
				WithRunAsNonRoot(true).
				WithRunAsUser(1000).
				WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := PodFromTemplate(tc.ps, &tc.ps.Spec.Template, tc.ordinal, tc.hash)
			if err != nil {
				t.Fatalf("desiredPod() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("desiredPod() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDrainHooks: every container and native sidecar without a preStop
// hook of its own sleeps spec.drainSeconds when it stops, at most the
// pod's termination grace period; an app's own hook is kept as it is,
// init containers get none, and drainSeconds 0 gives none.
func TestDrainHooks(t *testing.T) {
	sleeps := func(spec *corev1ac.PodSpecApplyConfiguration) map[string]string {
		got := map[string]string{}
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			switch {
			case c.Lifecycle == nil || c.Lifecycle.PreStop == nil:
				got[*c.Name] = "none"
			case c.Lifecycle.PreStop.Sleep != nil:
				got[*c.Name] = fmt.Sprintf("sleep %d", *c.Lifecycle.PreStop.Sleep.Seconds)
			default:
				got[*c.Name] = "own"
			}
		}
		return got
	}
	cases := map[string]struct {
		mutate func(*podsetv1alpha1.PodSet)
		want   map[string]string
	}{
		"the default drain": {
			want: map[string]string{"app": "sleep 3"},
		},
		"drainSeconds 10": {
			mutate: func(ps *podsetv1alpha1.PodSet) { ps.Spec.DrainSeconds = ptr.To[int32](10) },
			want:   map[string]string{"app": "sleep 10"},
		},
		"drainSeconds 0: no hook": {
			mutate: func(ps *podsetv1alpha1.PodSet) { ps.Spec.DrainSeconds = ptr.To[int32](0) },
			want:   map[string]string{"app": "none"},
		},
		"a grace period shorter than the drain, stored before admission refused it": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DrainSeconds = ptr.To[int32](10)
				ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](4)
			},
			want: map[string]string{"app": "sleep 4"},
		},
		"an app's own hooks, a sidecar, an init container": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Containers = append(ps.Spec.Template.Spec.Containers,
					corev1.Container{Name: "own-sleep", Image: "busybox:1.36", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}},
					corev1.Container{Name: "own-exec", Image: "busybox:1.36", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"quit"}}}}},
					corev1.Container{Name: "post-start", Image: "busybox:1.36", Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"hi"}}}}})
				ps.Spec.Template.Spec.InitContainers = []corev1.Container{
					{Name: "init", Image: "busybox:1.36"},
					{Name: "proxy", Image: "envoy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
				}
			},
			want: map[string]string{"app": "sleep 3", "own-sleep": "sleep 1", "own-exec": "own", "post-start": "sleep 3", "init": "none", "proxy": "sleep 3"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			if tc.mutate != nil {
				tc.mutate(ps)
			}
			got, err := DesiredPod(ps, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sleeps(got.Spec)); diff != "" {
				t.Errorf("preStop hooks (-want +got):\n%s", diff)
			}
			// A postStart hook stays beside the operator's preStop.
			for _, c := range got.Spec.Containers {
				if *c.Name == "post-start" && (c.Lifecycle.PostStart == nil || c.Lifecycle.PostStart.Exec == nil) {
					t.Errorf("container post-start lost its postStart hook: %+v", c.Lifecycle)
				}
			}
		})
	}
}

// TestPodUpdateKeepsTheDrainHooks: an apply to a running pod sends the
// preStop hooks the pod was made with, since a lifecycle cannot change:
// none to a pod made before the operator gave one, the old sleep to a pod
// made before drainSeconds changed.
func TestPodUpdateKeepsTheDrainHooks(t *testing.T) {
	cases := map[string]struct {
		pod  func(*podBuilder)
		want *corev1ac.LifecycleApplyConfiguration
	}{
		"a pod of an earlier release, without the hook": {pod: func(*podBuilder) {}, want: nil},
		"a pod made with the hook":                      {pod: func(b *podBuilder) { b.preStop() }, want: drainHook(5)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			ps.Spec.DrainSeconds = ptr.To[int32](7)
			b := makePod("web-0").controlledBy(ps)
			tc.pod(b)
			pod := b.obj()
			ac, err := PodUpdate(ps, &ps.Spec.Template, &pod, TemplateHash(ps))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ac.Spec.Containers[0].Lifecycle); diff != "" {
				t.Errorf("lifecycle sent (-want +got):\n%s", diff)
			}
			// The pod's slim copy, as the cache keeps it, sends the same.
			slim, err := SlimPod(pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			ac, err = PodUpdate(ps, &ps.Spec.Template, slim.(*corev1.Pod), TemplateHash(ps))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ac.Spec.Containers[0].Lifecycle); diff != "" {
				t.Errorf("lifecycle sent from the slim pod (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDesiredPodHardening checks the hardening invariants on pods from
// templates that are silent, or explicit, about each field.
func TestDesiredPodHardening(t *testing.T) {
	cases := map[string]struct {
		spec corev1.PodSpec
		// wantReadOnly is readOnlyRootFilesystem of every container.
		wantReadOnly  bool
		wantAutomount bool
		wantSeccomp   corev1.SeccompProfileType
		// wantDrop is capabilities.drop of every container.
		wantDrop []corev1.Capability
	}{
		"a silent template": {
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Image: "x"}},
				Containers:     []corev1.Container{{Name: "a", Image: "x"}, {Name: "b", Image: "y"}},
			},
			wantReadOnly: true, wantSeccomp: corev1.SeccompProfileTypeRuntimeDefault, wantDrop: []corev1.Capability{"ALL"},
		},
		"empty security contexts": {
			spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{}},
				InitContainers:  []corev1.Container{{Name: "init", Image: "x", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{}}}},
				Containers:      []corev1.Container{{Name: "a", Image: "x", SecurityContext: &corev1.SecurityContext{}}},
			},
			wantReadOnly: true, wantSeccomp: corev1.SeccompProfileTypeRuntimeDefault, wantDrop: []corev1.Capability{"ALL"},
		},
		"readOnlyRootFilesystem false, automount true and Localhost kept; other drops kept": {
			spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(true),
				SecurityContext:              &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("p.json")}},
				InitContainers: []corev1.Container{{Name: "init", Image: "x", SecurityContext: &corev1.SecurityContext{
					ReadOnlyRootFilesystem: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW", "CHOWN"}},
				}}},
				Containers: []corev1.Container{{Name: "a", Image: "x", SecurityContext: &corev1.SecurityContext{
					ReadOnlyRootFilesystem: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW", "CHOWN"}},
				}}},
			},
			wantReadOnly: false, wantAutomount: true, wantSeccomp: corev1.SeccompProfileTypeLocalhost,
			wantDrop: []corev1.Capability{"ALL", "NET_RAW", "CHOWN"},
		},
		"ALL already dropped is not repeated": {
			spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "a", Image: "x", SecurityContext: &corev1.SecurityContext{
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW", "ALL"}},
				}}},
			},
			wantReadOnly: true, wantSeccomp: corev1.SeccompProfileTypeRuntimeDefault,
			wantDrop: []corev1.Capability{"NET_RAW", "ALL"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := makePodSet("web").Obj()
			ps.Spec.Template.Spec = tc.spec
			pod, err := PodFromTemplate(ps, &ps.Spec.Template, 0, "h")
			if err != nil {
				t.Fatalf("desiredPod() error = %v", err)
			}
			spec := pod.Spec
			if got := ptr.Deref(spec.AutomountServiceAccountToken, !tc.wantAutomount); got != tc.wantAutomount {
				t.Errorf("automountServiceAccountToken = %v, want %v", got, tc.wantAutomount)
			}
			sc := spec.SecurityContext
			if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) {
				t.Errorf("pod securityContext.runAsNonRoot is not true: %+v", sc)
			}
			if sc == nil || sc.SeccompProfile == nil || ptr.Deref(sc.SeccompProfile.Type, "") != tc.wantSeccomp {
				t.Errorf("pod securityContext.seccompProfile = %+v, want type %s", sc.SeccompProfile, tc.wantSeccomp)
			}
			if len(spec.Containers) != len(tc.spec.Containers) || len(spec.InitContainers) != len(tc.spec.InitContainers) {
				t.Fatalf("desiredPod() has %d containers and %d init containers, want %d and %d",
					len(spec.Containers), len(spec.InitContainers), len(tc.spec.Containers), len(tc.spec.InitContainers))
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				checkHardenedContainer(t, c, tc.wantReadOnly, tc.wantDrop)
			}
		})
	}
}

// checkHardenedContainer checks a container of a desired pod: no
// privilege escalation, readOnlyRootFilesystem wantReadOnly, and the
// capabilities wantDrop dropped.
func checkHardenedContainer(t *testing.T, c corev1ac.ContainerApplyConfiguration, wantReadOnly bool, wantDrop []corev1.Capability) {
	t.Helper()
	csc := c.SecurityContext
	if csc == nil {
		t.Errorf("container %s: no securityContext", *c.Name)
		return
	}
	if got := ptr.Deref(csc.AllowPrivilegeEscalation, true); got {
		t.Errorf("container %s: allowPrivilegeEscalation = %v, want false", *c.Name, csc.AllowPrivilegeEscalation)
	}
	if csc.ReadOnlyRootFilesystem == nil || *csc.ReadOnlyRootFilesystem != wantReadOnly {
		t.Errorf("container %s: readOnlyRootFilesystem = %v, want %v", *c.Name, csc.ReadOnlyRootFilesystem, wantReadOnly)
	}
	var drop []corev1.Capability
	if csc.Capabilities != nil {
		drop = csc.Capabilities.Drop
	}
	if diff := cmp.Diff(wantDrop, drop); diff != "" {
		t.Errorf("container %s: capabilities.drop (-want +got):\n%s", *c.Name, diff)
	}
}

// TestDesiredPodLeavesThePodSetAlone checks that building a pod neither
// changes the PodSet (it comes from the shared cache) nor shares memory
// with it, so that changing the pod cannot change the PodSet later.
func TestDesiredPodLeavesThePodSetAlone(t *testing.T) {
	ps := makePodSet("web").Replicas(3).MaxUnavailableOf(intstr.FromString("50%")).InitContainer("init", "busybox:1.36").Obj()
	ps.Spec.Template.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("p.json")}
	ps.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		ReadOnlyRootFilesystem: ptr.To(false),
		Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
	}
	ps.Status.Conditions = []metav1.Condition{{Type: podsetv1alpha1.ReadyCondition, Status: metav1.ConditionTrue}}
	before := ps.DeepCopy()

	first, err := PodFromTemplate(ps, &ps.Spec.Template, 1, "h")
	if err != nil {
		t.Fatalf("desiredPod() error = %v", err)
	}
	if diff := cmp.Diff(before, ps); diff != "" {
		t.Fatalf("desiredPod() changed the PodSet (-before +after):\n%s", diff)
	}
	second, err := PodFromTemplate(ps, &ps.Spec.Template, 1, "h")
	if err != nil {
		t.Fatalf("desiredPod() error = %v", err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("desiredPod() twice differs (-first +second):\n%s", diff)
	}

	// Change every part of the first pod that came from the template.
	first.Labels["tier"] = "changed"
	first.Annotations["example.com/note"] = "changed"
	first.Spec.SecurityContext.SeccompProfile.WithLocalhostProfile("changed")
	first.Spec.Containers[0].WithImage("changed").WithCommand("changed")
	first.Spec.Containers[0].SecurityContext.Capabilities.Drop[1] = "changed"
	first.Spec.Containers[0].SecurityContext.Capabilities.Add[0] = "changed"
	first.Spec.InitContainers[0].WithImage("changed")
	if diff := cmp.Diff(before, ps); diff != "" {
		t.Errorf("changing the desired pod changed the PodSet (-before +after):\n%s", diff)
	}
}

// inPlaceGate is the readiness gate of every pod the operator makes.
func inPlaceGate() *corev1ac.PodReadinessGateApplyConfiguration {
	return corev1ac.PodReadinessGate().WithConditionType(podsetv1alpha1.InPlaceUpdateReadyCondition)
}

// TestDesiredPodUnderRecreateHasTheGate: the gate is how every pod is
// drained before it is deleted, whatever the update policy.
func TestDesiredPodUnderRecreateHasTheGate(t *testing.T) {
	ps := makePodSet("web").Obj()
	ps.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
	got, err := PodFromTemplate(ps, &ps.Spec.Template, 0, "abc")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]corev1ac.PodReadinessGateApplyConfiguration{*inPlaceGate()}, got.Spec.ReadinessGates); diff != "" {
		t.Errorf("readiness gates under podUpdatePolicy Recreate (-want +got):\n%s", diff)
	}
}
