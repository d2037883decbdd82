package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/podset-dev/podset-operator/test/fixture"
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

// The image of every template, and the one the in-place scenario changes
// it to (and changes nothing else).
const (
	baseImage = "busybox:1.36"
	newImage  = "busybox:1.37"
)

// template is the pod template of every contender: the shipped sample's
// (config/samples), plus the benchmark's set and revision labels. A revision
// above 1 also sets an environment variable, so that a rollout changes the
// pod spec, not only its labels.
//
// Its grace period is 0, so a delete removes a pod at once, as for a pod
// whose kubelet has nothing to wait for, and the benchmark's cluster runs
// kwok without its pod-delete stage (cluster.go). Otherwise kwok finishes
// each deletion itself, by name and without a UID precondition, and repeats
// that delete from a stale event: a pod re-created under the same name in
// between (the operator's rollout) is killed, and its deletion sets off the
// next one. The benchmark would measure that chain, not the contenders.
func template(set string, rev int) corev1.PodTemplateSpec {
	c := corev1.Container{
		Name:    "app",
		Image:   baseImage,
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
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532)},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{c},
		},
	}
}

// imageTemplate is revision 1 of a set's template with the in-place
// scenario's new image: the only change, one a running pod can take.
func imageTemplate(set string) corev1.PodTemplateSpec {
	t := template(set, 1)
	t.Spec.Containers[0].Image = newImage
	return t
}

// newPodSet is a PodSet of the benchmark's template. maxUnavailable, when
// not empty, sets the rolling update budget, with podUpdatePolicy
// InPlaceIfPossible (the default, written out) unless -podset-policy says
// otherwise. podUpdatePolicy (-podset-policy) is empty for the default,
// InPlaceIfPossible, whose pods carry the readiness gate the operator
// opens, or Recreate.
func newPodSet(ns, name string, replicas int32, maxUnavailable string, podUpdatePolicy podsetv1alpha1.PodUpdatePolicy) *podsetv1alpha1.PodSet {
	ps := fixture.PodSet(ns, name).Replicas(replicas).Template(template(name, 1)).Obj()
	// The template's grace period is 0 (kwok deletes its pods at once),
	// which leaves no time for a drain hook: admission refuses a
	// drainSeconds above it. kwok runs no hook and no Service selects the
	// pods, so a drain would measure only waiting; the gated limit waits
	// as long (none).
	ps.Spec.DrainSeconds = ptr.To[int32](0)
	ps.Spec.UpdateStrategy.PodUpdatePolicy = podUpdatePolicy
	if maxUnavailable != "" {
		ps.Spec.UpdateStrategy = podsetv1alpha1.PodSetUpdateStrategy{
			Type:            podsetv1alpha1.RollingUpdateStrategyType,
			PodUpdatePolicy: cmp.Or(podUpdatePolicy, podsetv1alpha1.InPlaceIfPossibleUpdatePolicy),
			RollingUpdate:   &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.Parse(maxUnavailable))},
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

// desiredPod is the pod the operator applies for an ordinal: the limit
// applies the operator's own pods.
func desiredPod(ps *podsetv1alpha1.PodSet, ordinal int) *corev1ac.PodApplyConfiguration {
	pod, err := podset.DesiredPod(ps, ordinal)
	if err != nil {
		panic(fmt.Sprintf("building pod %d of %s: %v", ordinal, ps.Name, err))
	}
	return pod
}

// hardenedSpec is the template's pod spec with the operator's hardening, as
// a typed spec for the ReplicaSet, Deployment, StatefulSet and tutorial
// contenders. It leaves out the operator's readiness gate, which every
// pod of the operator carries whatever its podUpdatePolicy: only the
// operator opens it, and a built-in controller's pod with it would never
// be Ready.
func hardenedSpec(spec corev1.PodSpec) corev1.PodSpec {
	ps := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "spec"}}
	ps.Spec.Template.Spec = spec
	ps.Spec.UpdateStrategy.PodUpdatePolicy = podsetv1alpha1.RecreateUpdatePolicy
	var out corev1.PodSpec
	if err := viaJSON(desiredPod(ps, 0).Spec, &out); err != nil {
		panic(fmt.Sprintf("converting a hardened pod spec: %v", err))
	}
	out.ReadinessGates = nil
	return out
}

// hardenedTemplate is t with hardenedSpec's spec.
func hardenedTemplate(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	t.Spec = hardenedSpec(t.Spec)
	return t
}

// viaJSON converts in to out through JSON: an apply configuration to the
// typed object it describes.
func viaJSON(in, out any) error {
	data, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	return err
}
