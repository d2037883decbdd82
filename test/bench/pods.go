package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Labels the benchmark puts in every pod template, so that one pod watch
// can tell the sets and template revisions of every contender apart.
const (
	setLabel = "bench.podset.dev/set"
	revLabel = "bench.podset.dev/rev"
	// runLabel marks the benchmark's namespaces, so that a run can remove
	// what an interrupted run left behind.
	runLabel = "bench.podset.dev/run"
	// touchLabel is the label a converged pass is triggered with.
	touchLabel = "bench.podset.dev/touch"
)

// fieldManager is the operator's field manager: the limit applies its pods
// under the same name, so they are the operator's pods byte for byte.
const fieldManager = "podset-operator"

// benchFieldManager is the manager of every other write the benchmark makes.
const benchFieldManager = "podset-bench"

// template is the pod template of every contender: the shipped sample's
// (config/samples), plus the benchmark's set and revision labels. A revision
// above 1 also sets an environment variable, so that a rollout changes the
// pod spec, not only its labels.
func template(set string, rev int) corev1.PodTemplateSpec {
	c := corev1.Container{
		Name:    "app",
		Image:   "busybox:1.36",
		Command: []string{"sleep", "infinity"},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
		},
	}
	if rev > 1 {
		c.Env = []corev1.EnvVar{{Name: "REVISION", Value: strconv.Itoa(rev)}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			"app.kubernetes.io/name": "bench",
			setLabel:                 set,
			revLabel:                 strconv.Itoa(rev),
		}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532)},
			Containers:      []corev1.Container{c},
		},
	}
}

// newPodSet is a PodSet of the benchmark's template. maxUnavailable, when
// not empty, sets the rolling update budget.
func newPodSet(ns, name string, replicas int32, maxUnavailable string) *podsetv1alpha1.PodSet {
	ps := &podsetv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: podsetv1alpha1.PodSetSpec{
			Replicas: ptr.To(replicas),
			Template: template(name, 1),
		},
	}
	if maxUnavailable != "" {
		ps.Spec.UpdateStrategy = podsetv1alpha1.PodSetUpdateStrategy{
			Type:          podsetv1alpha1.RollingUpdateStrategyType,
			RollingUpdate: &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.Parse(maxUnavailable))},
		}
	}
	return ps
}

// The functions below rebuild the operator's desired pod (controller/
// desired_pod.go and controller/hardening.go) for the contenders that are
// not the operator: the same names, labels, owner reference and hardened
// spec. The tiny run checks that the limit's pods equal the operator's.

// podName is the name of the pod with the given ordinal.
func podName(set string, ordinal int) string { return set + "-" + strconv.Itoa(ordinal) }

// templateHash is the operator's template hash: FNV-64a of the template's
// JSON, in base 36. It must be computed from the PodSet as the API server
// returns it.
func templateHash(ps *podsetv1alpha1.PodSet) string {
	data, err := json.Marshal(ps.Spec.Template)
	if err != nil {
		panic(fmt.Sprintf("marshalling a pod template: %v", err))
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}

// desiredPod is the pod the operator applies for an ordinal.
func desiredPod(ps *podsetv1alpha1.PodSet, ordinal int, hash string) *corev1ac.PodApplyConfiguration {
	spec := hardenedSpecAC(ps.Spec.Template.Spec)
	labels := maps.Clone(ps.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[podsetv1alpha1.NameLabel] = ps.Name
	labels[podsetv1alpha1.OrdinalLabel] = strconv.Itoa(ordinal)
	labels[podsetv1alpha1.TemplateHashLabel] = hash
	pod := corev1ac.Pod(podName(ps.Name, ordinal), ps.Namespace).
		WithLabels(labels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(podsetv1alpha1.GroupVersion.String()).
			WithKind("PodSet").
			WithName(ps.Name).
			WithUID(ps.UID).
			WithController(true).
			WithBlockOwnerDeletion(true))
	if len(ps.Spec.Template.Annotations) > 0 {
		pod.WithAnnotations(ps.Spec.Template.Annotations)
	}
	pod.Spec = spec
	return pod
}

// hardenedSpec is the template's pod spec with the operator's hardening, as
// a typed spec for the ReplicaSet, Deployment and tutorial contenders.
func hardenedSpec(spec corev1.PodSpec) corev1.PodSpec {
	var out corev1.PodSpec
	mustConvert(hardenedSpecAC(spec), &out)
	return out
}

func hardenedSpecAC(spec corev1.PodSpec) *corev1ac.PodSpecApplyConfiguration {
	ac := &corev1ac.PodSpecApplyConfiguration{}
	mustConvert(spec, ac)
	if ac.AutomountServiceAccountToken == nil {
		ac.WithAutomountServiceAccountToken(false)
	}
	if ac.SecurityContext == nil {
		ac.WithSecurityContext(corev1ac.PodSecurityContext())
	}
	sc := ac.SecurityContext
	sc.WithRunAsNonRoot(true)
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type == nil || *sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost {
		sc.WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	}
	for i := range ac.InitContainers {
		hardenContainer(&ac.InitContainers[i])
	}
	for i := range ac.Containers {
		hardenContainer(&ac.Containers[i])
	}
	return ac
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

// mustConvert copies a value into another type of the same JSON shape.
func mustConvert(from, to any) {
	data, err := json.Marshal(from)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(data, to); err != nil {
		panic(err)
	}
}
