package podset

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The writes to a pod that exists: the apply that sends only what a running
// pod can take (PodUpdate) and the resize (PodResize).

// PodUpdate is the apply the operator sends to an existing pod, which the
// API server refuses if it changes anything a running pod cannot change:
// the desired pod of the revision hash, with the readiness gates the pod
// has (gates are immutable) and, of each container's cpu and memory, the
// values the pod runs with, and the drain hooks it was made with (a
// container's lifecycle cannot change). Resources change only through pods/resize,
// which is also how the VerticalPodAutoscaler and kubectl change them:
// the apply keeps what they set, as it keeps the fields it does not name.
// Everything else the apply sends is the pod's revision's, which the pod
// was made from, or an image. Its hostname and subdomain are the pod's:
// a running pod cannot change them, and the pods of a revision all have
// the revision's, but a pod made by a release before serviceName existed
// from a template with a subdomain has no hostname. The pod's UID makes
// it an update of that pod only.
func PodUpdate(ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec, pod *corev1.Pod, hash string) (*corev1ac.PodApplyConfiguration, error) {
	ac, err := PodFromTemplate(ps, tmpl, ordinalOf(ps, pod), hash)
	if err != nil {
		return nil, err
	}
	// The gates are an atomic list the operator set when it made the pod:
	// sending exactly the pod's keeps them, whatever the policy is now.
	ac.Spec.ReadinessGates = nil
	for _, g := range pod.Spec.ReadinessGates {
		ac.Spec.WithReadinessGates(corev1ac.PodReadinessGate().WithConditionType(g.ConditionType))
	}
	keepResources(ac.Spec.Containers, pod.Spec.Containers)
	keepResources(ac.Spec.InitContainers, pod.Spec.InitContainers)
	keepDrainHooks(ac.Spec.Containers, tmpl.Spec.Containers, pod.Spec.Containers)
	keepDrainHooks(ac.Spec.InitContainers, tmpl.Spec.InitContainers, pod.Spec.InitContainers)
	ac.Spec.Hostname, ac.Spec.Subdomain = nonEmpty(pod.Spec.Hostname), nonEmpty(pod.Spec.Subdomain)
	// The record of the last restart in place stays: an update in flight
	// finishes by it.
	if rec, ok := pod.Annotations[RestartRecordAnnotation]; ok {
		ac.WithAnnotations(map[string]string{RestartRecordAnnotation: rec})
	}
	return ac.WithUID(pod.UID), nil
}

// keepDrainHooks sets the preStop hook of each container whose template
// has none of its own to the pod's: the operator's sleep as long as
// spec.drainSeconds was when the pod was made, or none on a pod made
// before the operator gave one (an earlier release, or drainSeconds 0).
// The API server refuses any other: a pod's lifecycle cannot change.
func keepDrainHooks(apply []corev1ac.ContainerApplyConfiguration, tmpl, running []corev1.Container) {
	for i := range apply {
		c := &apply[i]
		name := ptr.Deref(c.Name, "")
		t := slices.IndexFunc(tmpl, func(t corev1.Container) bool { return t.Name == name })
		if c.Lifecycle == nil || t >= 0 && tmpl[t].Lifecycle != nil && tmpl[t].Lifecycle.PreStop != nil {
			continue
		}
		c.Lifecycle.PreStop = nil
		if j := slices.IndexFunc(running, func(r corev1.Container) bool { return r.Name == name }); j >= 0 {
			if l := running[j].Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
				c.Lifecycle.WithPreStop(sleepHook(l.PreStop.Sleep.Seconds))
			}
		}
		if c.Lifecycle.PreStop == nil && c.Lifecycle.PostStart == nil && c.Lifecycle.StopSignal == nil {
			c.Lifecycle = nil
		}
	}
}

// keepResources sets each resource quantity a container applies to the
// value the pod's container of that name has.
func keepResources(apply []corev1ac.ContainerApplyConfiguration, running []corev1.Container) {
	for i := range apply {
		c := &apply[i]
		j := slices.IndexFunc(running, func(r corev1.Container) bool { return r.Name == ptr.Deref(c.Name, "") })
		if j < 0 || c.Resources == nil {
			continue
		}
		keepQuantities(c.Resources.Requests, running[j].Resources.Requests)
		keepQuantities(c.Resources.Limits, running[j].Resources.Limits)
	}
}

func keepQuantities(apply *corev1.ResourceList, running corev1.ResourceList) {
	if apply == nil {
		return
	}
	for name := range *apply {
		if q, ok := running[name]; ok {
			(*apply)[name] = q
		}
	}
}

// PodResize is the apply to a pod's resize subresource that moves its
// containers' cpu and memory from the template from (the revision the pod
// was made from) to the template to: only the quantities the template
// changed, each container with the rest of its resources as the pod runs
// them, so a resize by someone else (the VerticalPodAutoscaler) of a
// quantity the template did not change is kept. It is nil when no
// container's resources change.
func PodResize(ps *podsetv1alpha1.PodSet, from, to *corev1.PodTemplateSpec, pod *corev1.Pod) *corev1ac.PodApplyConfiguration {
	containers := resizes(from.Spec.Containers, to.Spec.Containers, pod.Spec.Containers)
	initContainers := resizes(from.Spec.InitContainers, to.Spec.InitContainers, pod.Spec.InitContainers)
	if len(containers) == 0 && len(initContainers) == 0 {
		return nil
	}
	spec := corev1ac.PodSpec().WithContainers(containers...).WithInitContainers(initContainers...)
	return corev1ac.Pod(pod.Name, ps.Namespace).WithUID(pod.UID).WithSpec(spec)
}

// resizes lists the running containers whose cpu and memory the change
// from the containers from to the containers want moves, with their new
// resources: want's where want differs from from, the running
// container's elsewhere.
func resizes(from, want, running []corev1.Container) []*corev1ac.ContainerApplyConfiguration {
	var out []*corev1ac.ContainerApplyConfiguration
	for _, w := range want {
		i := slices.IndexFunc(from, func(f corev1.Container) bool { return f.Name == w.Name })
		j := slices.IndexFunc(running, func(r corev1.Container) bool { return r.Name == w.Name })
		if i < 0 || j < 0 || equality.Semantic.DeepEqual(from[i].Resources, w.Resources) {
			continue
		}
		requests := resizedQuantities(from[i].Resources.Requests, w.Resources.Requests, running[j].Resources.Requests)
		limits := resizedQuantities(from[i].Resources.Limits, w.Resources.Limits, running[j].Resources.Limits)
		if equality.Semantic.DeepEqual(requests, running[j].Resources.Requests) && equality.Semantic.DeepEqual(limits, running[j].Resources.Limits) {
			continue
		}
		res := corev1ac.ResourceRequirements()
		if len(requests) > 0 {
			res.WithRequests(requests)
		}
		if len(limits) > 0 {
			res.WithLimits(limits)
		}
		out = append(out, corev1ac.Container().WithName(w.Name).WithResources(res))
	}
	return out
}

// resizedQuantities is a container's resource list after a template
// change from from to want: want's quantity where the template changed it,
// the running one where it did not.
func resizedQuantities(from, want, running corev1.ResourceList) corev1.ResourceList {
	if len(want) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for name, q := range want {
		if r, ok := running[name]; ok && q.Equal(from[name]) {
			q = r
		}
		out[name] = q
	}
	return out
}

// nonEmpty is s as an optional field of an apply: nil when empty, so an
// apply leaves out what the object does not have.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
