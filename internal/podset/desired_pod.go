package podset

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// PodName is the name of the pod with the given ordinal.
func PodName(podSetName string, ordinal int) string {
	return podSetName + "-" + strconv.Itoa(ordinal)
}

// PodOrdinal parses the ordinal out of a pod name "<podSetName>-<ordinal>".
// It reports false for any other name, including ordinals with leading
// zeros, which podName never makes.
func PodOrdinal(podSetName, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, podSetName)
	suffix, dash := strings.CutPrefix(rest, "-")
	if !ok || !dash || suffix == "" || len(suffix) > 1 && suffix[0] == '0' {
		return 0, false
	}
	for _, c := range suffix {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n >= podsetv1alpha1.MaxReplicas {
		return 0, false
	}
	return n, true
}

// PodTemplate is the template of a PodSet's current revision, which its
// pods are made from: spec.template, with spec.serviceName as its
// subdomain when set (and the template's own hostname, which admission
// refuses beside serviceName, dropped: PodFromTemplate gives each pod its
// own name). The subdomain is part of the revision because a running pod
// cannot change it: a new serviceName is a new revision, and its pods are
// recreated (updateWayFor), while a pod held back by a partition is
// recreated with the subdomain of the revision it runs. Without
// serviceName it is spec.template itself, so the hashes of PodSets made
// before serviceName existed do not change.
func PodTemplate(ps *podsetv1alpha1.PodSet) *corev1.PodTemplateSpec {
	if ps.Spec.ServiceName == "" {
		return &ps.Spec.Template
	}
	tmpl := ps.Spec.Template.DeepCopy()
	tmpl.Spec.Subdomain = ps.Spec.ServiceName
	tmpl.Spec.Hostname = ""
	return tmpl
}

// TemplateHash identifies the template of a PodSet's current revision
// (PodTemplate): pods labelled with another hash were made from an older
// one and are rolled out.
func TemplateHash(ps *podsetv1alpha1.PodSet) string {
	data, err := json.Marshal(PodTemplate(ps))
	if err != nil {
		// A PodTemplateSpec always marshals; this is unreachable.
		panic(fmt.Sprintf("marshalling a pod template: %v", err))
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}

// selectorString is the label selector of a PodSet's pods.
func selectorString(ps *podsetv1alpha1.PodSet) string {
	return podsetv1alpha1.NameLabel + "=" + ps.Name
}

// DesiredPod is the pod the operator applies for an ordinal of a PodSet,
// exactly as a pass builds it: for tools that must make the operator's pods
// byte for byte (the benchmark's client-go limit applies them).
func DesiredPod(ps *podsetv1alpha1.PodSet, ordinal int) (*corev1ac.PodApplyConfiguration, error) {
	return PodFromTemplate(ps, PodTemplate(ps), ordinal, TemplateHash(ps))
}

// PodFromTemplate is the whole pod the PodSet wants at an ordinal, made from the
// template of one of its revisions (hash): because the pod is written with
// server-side apply, every field the operator owns must be in it, every
// time. It is the template plus the operator's labels, the controller owner
// reference, the hardening of hardenPodSpec, the drain hooks of
// addDrainHooks and, when the template has a subdomain (spec.serviceName,
// PodTemplate), the pod's own name as its hostname, as a StatefulSet's
// pods have it: the EndpointSlice controller publishes a pod's hostname
// only when it is set, and DNS then answers <pod>.<subdomain>.<namespace>.svc.
func PodFromTemplate(ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec, ordinal int, hash string) (*corev1ac.PodApplyConfiguration, error) {
	spec := &corev1ac.PodSpecApplyConfiguration{}
	if err := Convert(tmpl.Spec, spec); err != nil {
		return nil, fmt.Errorf("converting the pod template: %w", err)
	}
	hardenPodSpec(spec)
	addDrainHooks(spec, DrainHookSeconds(ps, tmpl))
	// Every pod carries the gate, whatever the update policy: it is how
	// the operator drains a pod before it stops it (gate.go).
	spec.WithReadinessGates(corev1ac.PodReadinessGate().WithConditionType(podsetv1alpha1.InPlaceUpdateReadyCondition))
	name := PodName(ps.Name, ordinal)
	if tmpl.Spec.Subdomain != "" && tmpl.Spec.Hostname == "" {
		spec.WithHostname(name)
	}

	pod := corev1ac.Pod(name, ps.Namespace).
		WithLabels(podLabels(ps, tmpl, ordinal, hash)).
		WithOwnerReferences(ControllerReference(ps))
	if len(tmpl.Annotations) > 0 {
		pod.WithAnnotations(tmpl.Annotations)
	}
	pod.Spec = spec
	return pod, nil
}

// DrainHookSeconds is how long the preStop sleep that the operator gives a
// pod's containers (addDrainHooks) holds each of them when the pod
// stops: spec.drainSeconds, at most the template's termination grace
// period, which the API server refuses a longer sleep than (admission
// refuses such a PodSet; one stored before that rule is capped). 0: no
// hook.
func DrainHookSeconds(ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec) int64 {
	grace := ptr.Deref(tmpl.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)
	return max(0, min(int64(DrainSeconds(ps)/time.Second), grace))
}

// addDrainHooks gives every container and sidecar that has no preStop hook
// of its own a preStop sleep of seconds: whoever stops the pod (an
// eviction by kubectl drain, the cluster autoscaler or Karpenter, a
// kubectl delete pod, the node's graceful shutdown, the operator), the
// kubelet keeps its containers running that long before they get SIGTERM,
// while the EndpointSlice controller lists the terminating pod as not
// ready: the pod leaves its Services for the drain before its app stops,
// with no preStop sleep of the app's own and whether the operator runs or
// not. An app's own hook is never replaced or lengthened. Init containers
// that are not sidecars cannot have hooks, and do not run when a pod
// stops.
func addDrainHooks(spec *corev1ac.PodSpecApplyConfiguration, seconds int64) {
	if seconds <= 0 {
		return
	}
	for i := range spec.Containers {
		addDrainHook(&spec.Containers[i], seconds)
	}
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; ptr.Deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways {
			addDrainHook(c, seconds)
		}
	}
}

func addDrainHook(c *corev1ac.ContainerApplyConfiguration, seconds int64) {
	if c.Lifecycle == nil {
		c.WithLifecycle(corev1ac.Lifecycle())
	}
	if c.Lifecycle.PreStop == nil {
		c.Lifecycle.WithPreStop(sleepHook(seconds))
	}
}

// sleepHook is a preStop handler that sleeps seconds.
func sleepHook(seconds int64) *corev1ac.LifecycleHandlerApplyConfiguration {
	return corev1ac.LifecycleHandler().WithSleep(corev1ac.SleepAction().WithSeconds(seconds))
}

// ControllerReference is the owner reference of everything a PodSet
// controls: its pods and its ControllerRevisions. blockOwnerDeletion keeps
// a foreground deletion of the PodSet waiting for them.
func ControllerReference(ps *podsetv1alpha1.PodSet) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(podsetv1alpha1.GroupVersion.String()).
		WithKind("PodSet").
		WithName(ps.Name).
		WithUID(ps.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// podLabels are the labels of the pod at an ordinal: the template's, and
// the operator's, which win over the template's.
func podLabels(ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec, ordinal int, hash string) map[string]string {
	labels := maps.Clone(tmpl.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[podsetv1alpha1.NameLabel] = ps.Name
	labels[podsetv1alpha1.OrdinalLabel] = strconv.Itoa(ordinal)
	labels[podsetv1alpha1.TemplateHashLabel] = hash
	return labels
}

// Convert copies a typed API value into its apply configuration. Apply
// configurations share the JSON shape of their types, so JSON is the
// faithful conversion.
func Convert(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

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
