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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// drifted reports whether a pod lost what the operator owns on it and can
// restore in place: the labels and annotations of its revision's template,
// the operator's labels, the controller reference, or a container image.
// Everything else in a pod's spec is immutable.
func drifted(ps *podsetv1alpha1.PodSet, tmpl *corev1.PodTemplateSpec, pod *corev1.Pod, ordinal int, hash string) bool {
	// The labels podLabels makes, checked without making them: this runs
	// for every running pod in every pass.
	var buf [20]byte
	if got, ok := pod.Labels[podsetv1alpha1.NameLabel]; !ok || got != ps.Name {
		return true
	}
	if got, ok := pod.Labels[podsetv1alpha1.OrdinalLabel]; !ok || got != string(strconv.AppendInt(buf[:0], int64(ordinal), 10)) {
		return true
	}
	if got, ok := pod.Labels[podsetv1alpha1.TemplateHashLabel]; !ok || got != hash {
		return true
	}
	for k, v := range tmpl.Labels {
		if k == podsetv1alpha1.NameLabel || k == podsetv1alpha1.OrdinalLabel || k == podsetv1alpha1.TemplateHashLabel {
			continue // podLabels sets these itself
		}
		if got, ok := pod.Labels[k]; !ok || got != v {
			return true
		}
	}
	for k, v := range tmpl.Annotations {
		if got, ok := pod.Annotations[k]; !ok || got != v {
			return true
		}
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		return true
	}
	return imagesDiffer(tmpl.Spec.Containers, pod.Spec.Containers) ||
		imagesDiffer(tmpl.Spec.InitContainers, pod.Spec.InitContainers)
}

func imagesDiffer(want, got []corev1.Container) bool {
	for i := range want {
		c := &want[i]
		j := i // a pod's containers are in its template's order
		if j >= len(got) || got[j].Name != c.Name {
			j = slices.IndexFunc(got, func(g corev1.Container) bool { return g.Name == c.Name })
		}
		if j < 0 {
			if c.Image != "" {
				return true
			}
			continue
		}
		if got[j].Image != c.Image {
			return true
		}
	}
	return false
}

// Convert copies a value into another of the same JSON shape: a typed API
// value into its apply configuration (apply configurations share the JSON
// shape of their types, so JSON is the faithful conversion), or into the
// maps and lists its JSON decodes to (RecreateFields).
func Convert(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}
