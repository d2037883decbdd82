package podset

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// hardenPodSpec makes a pod spec pass the Pod Security "restricted" profile
// and adds the operator's defaults where the template is silent. The
// operator owns these fields: they are part of every apply.
//
// It only tightens: templateViolations refuses a template that explicitly
// asks for less, before a pod is ever built from it.
func hardenPodSpec(spec *corev1ac.PodSpecApplyConfiguration) {
	if spec.AutomountServiceAccountToken == nil {
		spec.WithAutomountServiceAccountToken(false)
	}
	if spec.SecurityContext == nil {
		spec.WithSecurityContext(corev1ac.PodSecurityContext())
	}
	sc := spec.SecurityContext
	sc.WithRunAsNonRoot(true)
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type == nil || *sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost {
		sc.WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	}
	for i := range spec.InitContainers {
		hardenContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		hardenContainer(&spec.Containers[i])
	}
}

func hardenContainer(c *corev1ac.ContainerApplyConfiguration) {
	if c.SecurityContext == nil {
		c.WithSecurityContext(corev1ac.SecurityContext())
	}
	sc := c.SecurityContext
	sc.WithAllowPrivilegeEscalation(false)
	if sc.ReadOnlyRootFilesystem == nil {
		sc.WithReadOnlyRootFilesystem(true)
	}
	if sc.Capabilities == nil {
		sc.WithCapabilities(corev1ac.Capabilities())
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		sc.Capabilities.Drop = append([]corev1.Capability{"ALL"}, sc.Capabilities.Drop...)
	}
}

// TemplateViolations lists, with the path of each field, what a pod spec
// explicitly asks for that the Pod Security "restricted" profile forbids and
// hardenPodSpec will not silently override. It mirrors the
// ValidatingAdmissionPolicy in config/policy, so a PodSet that reached the
// API server without that policy is still refused, as a Stalled condition.
func TemplateViolations(spec *corev1.PodSpec) []string {
	var v violations
	if spec.HostNetwork {
		v.add("spec.template.spec.hostNetwork: must not be true")
	}
	if spec.HostPID {
		v.add("spec.template.spec.hostPID: must not be true")
	}
	if spec.HostIPC {
		v.add("spec.template.spec.hostIPC: must not be true")
	}
	for _, vol := range spec.Volumes {
		if vol.HostPath != nil {
			v.add("spec.template.spec.volumes[name=%s].hostPath: must not be set", vol.Name)
		}
	}
	if len(spec.EphemeralContainers) > 0 {
		v = append(v, "spec.template.spec.ephemeralContainers: must not be set; ephemeral containers cannot be part of a pod when it is created")
	}
	if sc := spec.SecurityContext; sc != nil {
		v.identity("spec.template.spec.securityContext", sc.RunAsNonRoot, sc.RunAsUser, sc.SeccompProfile)
	}
	for i := range spec.InitContainers {
		v.container("initContainers", &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		v.container("containers", &spec.Containers[i])
	}
	return v
}

// violations are TemplateViolations' findings.
type violations []string

// add adds a finding of the restricted profile.
func (v *violations) add(format string, args ...any) {
	*v = append(*v, fmt.Sprintf(format, args...)+" (Pod Security restricted)")
}

// identity checks who a pod or a container runs as, and its seccomp
// profile, at path.
func (v *violations) identity(path string, runAsNonRoot *bool, runAsUser *int64, seccomp *corev1.SeccompProfile) {
	if runAsNonRoot != nil && !*runAsNonRoot {
		v.add("%s.runAsNonRoot: must not be false", path)
	}
	if runAsUser != nil && *runAsUser == 0 {
		v.add("%s.runAsUser: must not be 0", path)
	}
	if seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeUnconfined {
		v.add("%s.seccompProfile.type: must not be Unconfined", path)
	}
}

// container checks a container of the list (containers, initContainers).
func (v *violations) container(list string, c *corev1.Container) {
	path := fmt.Sprintf("spec.template.spec.%s[name=%s]", list, c.Name)
	if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.HostPort != 0 }) {
		v.add("%s.ports.hostPort: must not be set", path)
	}
	sc := c.SecurityContext
	if sc == nil {
		return
	}
	if sc.Privileged != nil && *sc.Privileged {
		v.add("%s.securityContext.privileged: must not be true", path)
	}
	if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
		v.add("%s.securityContext.allowPrivilegeEscalation: must not be true", path)
	}
	if sc.Capabilities != nil && slices.ContainsFunc(sc.Capabilities.Add, func(c corev1.Capability) bool { return c != "NET_BIND_SERVICE" }) {
		v.add("%s.securityContext.capabilities.add: may only contain NET_BIND_SERVICE", path)
	}
	v.identity(path+".securityContext", sc.RunAsNonRoot, sc.RunAsUser, sc.SeccompProfile)
}

// ReservedLabelViolations refuses template labels under the operator's
// podset.dev/ prefix: the operator sets those on every pod, and a template
// fighting over them would make pods drift on every pass. It mirrors the
// admission policy's rule.
func ReservedLabelViolations(labels map[string]string) []string {
	var v []string
	for k := range labels {
		if strings.HasPrefix(k, "podset.dev/") {
			v = append(v, "spec.template.metadata.labels: keys with the prefix podset.dev/ are reserved for the operator")
			break
		}
	}
	return v
}
