package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
)

// cleanSpec is a pod spec that uses everything the restricted profile still
// allows: a non-root user, Localhost seccomp, NET_BIND_SERVICE, container
// ports, an emptyDir volume and explicit safe settings.
func cleanSpec() corev1.PodSpec {
	safe := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{
			Privileged:               ptr.To(false),
			AllowPrivilegeEscalation: ptr.To(false),
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To[int64](1000),
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			Capabilities: &corev1.Capabilities{
				Add:  []corev1.Capability{"NET_BIND_SERVICE"},
				Drop: []corev1.Capability{"ALL"},
			},
		}
	}
	return corev1.PodSpec{
		HostNetwork: false,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("p.json")},
		},
		Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		InitContainers: []corev1.Container{{
			Name: "init", Image: "busybox:1.36", SecurityContext: safe(),
		}},
		Containers: []corev1.Container{
			{
				Name: "app", Image: "nginx:1.27", SecurityContext: safe(),
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			},
			{Name: "sidecar", Image: "envoy:1"},
		},
	}
}

func TestTemplateViolations(t *testing.T) {
	const (
		app  = "spec.template.spec.containers[name=app]"
		init = "spec.template.spec.initContainers[name=init]"
	)
	type violationCase struct {
		change func(*corev1.PodSpec)
		want   []string
	}
	cases := map[string]violationCase{
		"a clean template": {
			change: func(*corev1.PodSpec) {},
		},
		"a template with no security settings at all": {
			change: func(s *corev1.PodSpec) {
				*s = corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}
			},
		},
		"NET_BIND_SERVICE alone may be added": {
			change: func(s *corev1.PodSpec) {
				s.Containers[1].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}
			},
		},
		"hostNetwork": {
			change: func(s *corev1.PodSpec) { s.HostNetwork = true },
			want:   []string{"spec.template.spec.hostNetwork: must not be true (Pod Security restricted)"},
		},
		"hostPID": {
			change: func(s *corev1.PodSpec) { s.HostPID = true },
			want:   []string{"spec.template.spec.hostPID: must not be true (Pod Security restricted)"},
		},
		"hostIPC": {
			change: func(s *corev1.PodSpec) { s.HostIPC = true },
			want:   []string{"spec.template.spec.hostIPC: must not be true (Pod Security restricted)"},
		},
		"a hostPath volume": {
			change: func(s *corev1.PodSpec) {
				s.Volumes = append(s.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			},
			want: []string{"spec.template.spec.volumes[name=host].hostPath: must not be set (Pod Security restricted)"},
		},
		"ephemeral containers": {
			change: func(s *corev1.PodSpec) {
				s.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "x"}}}
			},
			want: []string{"spec.template.spec.ephemeralContainers: must not be set; ephemeral containers cannot be part of a pod when it is created"},
		},
		"pod runAsNonRoot false": {
			change: func(s *corev1.PodSpec) { s.SecurityContext.RunAsNonRoot = ptr.To(false) },
			want:   []string{"spec.template.spec.securityContext.runAsNonRoot: must not be false (Pod Security restricted)"},
		},
		"pod runAsUser 0": {
			change: func(s *corev1.PodSpec) { s.SecurityContext.RunAsUser = ptr.To[int64](0) },
			want:   []string{"spec.template.spec.securityContext.runAsUser: must not be 0 (Pod Security restricted)"},
		},
		"pod seccomp Unconfined": {
			change: func(s *corev1.PodSpec) {
				s.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
			},
			want: []string{"spec.template.spec.securityContext.seccompProfile.type: must not be Unconfined (Pod Security restricted)"},
		},
		"container capabilities.add with SYS_ADMIN": {
			change: func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
			},
			want: []string{app + ".securityContext.capabilities.add: may only contain NET_BIND_SERVICE (Pod Security restricted)"},
		},
		"container capabilities.add with NET_BIND_SERVICE and NET_RAW": {
			change: func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE", "NET_RAW"}
			},
			want: []string{app + ".securityContext.capabilities.add: may only contain NET_BIND_SERVICE (Pod Security restricted)"},
		},
		"container hostPort, named once for two ports": {
			change: func(s *corev1.PodSpec) {
				s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}, {ContainerPort: 443, HostPort: 443}}
			},
			want: []string{app + ".ports.hostPort: must not be set (Pod Security restricted)"},
		},
		"a violation in the second container names it": {
			change: func(s *corev1.PodSpec) {
				s.Containers[1].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			},
			want: []string{"spec.template.spec.containers[name=sidecar].securityContext.privileged: must not be true (Pod Security restricted)"},
		},
		"init container capabilities.add with SYS_PTRACE": {
			change: func(s *corev1.PodSpec) {
				s.InitContainers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_PTRACE"}
			},
			want: []string{init + ".securityContext.capabilities.add: may only contain NET_BIND_SERVICE (Pod Security restricted)"},
		},
		"init container hostPort": {
			change: func(s *corev1.PodSpec) {
				s.InitContainers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
			},
			want: []string{init + ".ports.hostPort: must not be set (Pod Security restricted)"},
		},
		"every violation at once, pod first, then init containers, then containers": {
			change: func(s *corev1.PodSpec) {
				s.HostNetwork, s.HostPID, s.HostIPC = true, true, true
				s.Volumes = append(s.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var"}}})
				s.SecurityContext.RunAsNonRoot = ptr.To(false)
				s.SecurityContext.RunAsUser = ptr.To[int64](0)
				s.Containers[0].SecurityContext.Privileged = ptr.To(true)
				s.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](0)
				s.InitContainers[0].Ports = []corev1.ContainerPort{{ContainerPort: 1, HostPort: 1}}
				s.InitContainers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
			},
			want: []string{
				"spec.template.spec.hostNetwork: must not be true (Pod Security restricted)",
				"spec.template.spec.hostPID: must not be true (Pod Security restricted)",
				"spec.template.spec.hostIPC: must not be true (Pod Security restricted)",
				"spec.template.spec.volumes[name=h].hostPath: must not be set (Pod Security restricted)",
				"spec.template.spec.securityContext.runAsNonRoot: must not be false (Pod Security restricted)",
				"spec.template.spec.securityContext.runAsUser: must not be 0 (Pod Security restricted)",
				init + ".ports.hostPort: must not be set (Pod Security restricted)",
				init + ".securityContext.allowPrivilegeEscalation: must not be true (Pod Security restricted)",
				app + ".securityContext.privileged: must not be true (Pod Security restricted)",
				app + ".securityContext.runAsUser: must not be 0 (Pod Security restricted)",
			},
		},
	}
	// The same settings of a container and of an init container are
	// violations, each named by its own path.
	for _, c := range []struct {
		kind, path string
		sc         func(*corev1.PodSpec) *corev1.SecurityContext
	}{
		{"container", app, func(s *corev1.PodSpec) *corev1.SecurityContext { return s.Containers[0].SecurityContext }},
		{"init container", init, func(s *corev1.PodSpec) *corev1.SecurityContext { return s.InitContainers[0].SecurityContext }},
	} {
		for setting, v := range map[string]struct {
			change func(*corev1.SecurityContext)
			want   string
		}{
			"privileged":                    {func(sc *corev1.SecurityContext) { sc.Privileged = ptr.To(true) }, ".securityContext.privileged: must not be true (Pod Security restricted)"},
			"allowPrivilegeEscalation true": {func(sc *corev1.SecurityContext) { sc.AllowPrivilegeEscalation = ptr.To(true) }, ".securityContext.allowPrivilegeEscalation: must not be true (Pod Security restricted)"},
			"runAsNonRoot false":            {func(sc *corev1.SecurityContext) { sc.RunAsNonRoot = ptr.To(false) }, ".securityContext.runAsNonRoot: must not be false (Pod Security restricted)"},
			"runAsUser 0":                   {func(sc *corev1.SecurityContext) { sc.RunAsUser = ptr.To[int64](0) }, ".securityContext.runAsUser: must not be 0 (Pod Security restricted)"},
			"seccomp Unconfined": {func(sc *corev1.SecurityContext) {
				sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
			}, ".securityContext.seccompProfile.type: must not be Unconfined (Pod Security restricted)"},
		} {
			cases[c.kind+" "+setting] = violationCase{
				change: func(s *corev1.PodSpec) { v.change(c.sc(s)) },
				want:   []string{c.path + v.want},
			}
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := cleanSpec()
			tc.change(&spec)
			got := TemplateViolations(&spec)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("templateViolations() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHardenPodSpecIsIdempotent checks that hardening a hardened spec
// changes nothing: the operator applies the same pod on every pass.
func TestHardenPodSpecIsIdempotent(t *testing.T) {
	specs := map[string]corev1.PodSpec{
		"clean":  cleanSpec(),
		"silent": {InitContainers: []corev1.Container{{Name: "i"}}, Containers: []corev1.Container{{Name: "a"}}},
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			once := &corev1ac.PodSpecApplyConfiguration{}
			if err := Convert(spec, once); err != nil {
				t.Fatal(err)
			}
			hardenPodSpec(once)
			twice := &corev1ac.PodSpecApplyConfiguration{}
			if err := Convert(once, twice); err != nil {
				t.Fatal(err)
			}
			hardenPodSpec(twice)
			if diff := cmp.Diff(once, twice); diff != "" {
				t.Errorf("hardenPodSpec() twice differs from once (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestReservedLabelViolations(t *testing.T) {
	const reserved = "spec.template.metadata.labels: keys with the prefix podset.dev/ are reserved for the operator"
	cases := map[string]struct {
		labels map[string]string
		want   []string
	}{
		"no labels":                   {},
		"ordinary labels":             {labels: map[string]string{"tier": "web", "app.kubernetes.io/name": "web"}},
		"a look-alike prefix":         {labels: map[string]string{"podset.dev.example/name": "x", "sub.podset.dev/x": "y"}},
		"the name label":              {labels: map[string]string{"podset.dev/name": "web"}, want: []string{reserved}},
		"the template-hash label":     {labels: map[string]string{"tier": "web", "podset.dev/template-hash": "x"}, want: []string{reserved}},
		"several reserved keys, once": {labels: map[string]string{"podset.dev/ordinal": "1", "podset.dev/other": "", "podset.dev/name": "x"}, want: []string{reserved}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ReservedLabelViolations(tc.labels)); diff != "" {
				t.Errorf("reservedLabelViolations() (-want +got):\n%s", diff)
			}
		})
	}
}
