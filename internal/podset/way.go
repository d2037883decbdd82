package podset

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// In-place updates. Kubernetes lets a running pod change its labels,
// annotations and container images through the pod itself, and its
// containers' cpu and memory through the pods/resize subresource. Under
// podUpdatePolicy InPlaceIfPossible a pod whose revision differs from the
// current template only in those is updated where it runs; anything else
// recreates it. An update that restarts containers (a new image, or a
// resize a container's resizePolicy restarts it for) first sets the pod's
// readiness gate condition False and waits for the kubelet to take the pod
// out of Ready, so it leaves Service endpoints before its containers stop;
// the condition goes True again once the pod's containers run the new
// images. Everything a pass needs to know about an update in flight is on
// the pod (its template-hash label, the gate condition, its container
// statuses), so an operator restart picks it up where it was.

// UpdateWay is how an out-of-date pod gets to the current revision.
type UpdateWay struct {
	// InPlace is false when the pod is recreated; Why then says why.
	InPlace bool
	Why     string
	// Resize: cpu or memory change, through pods/resize.
	Resize bool
	// Images names the containers whose image changes, for events.
	Images []string
	// Restarts names the containers that restart: those whose image
	// changes and those whose resizePolicy restarts them for the resize.
	// A pod whose containers restart is drained first (its gate goes
	// False), and the update counts against maxUnavailable.
	Restarts []string
}

// Restart reports an update that restarts containers.
func (w UpdateWay) Restart() bool { return len(w.Restarts) > 0 }

// metadataOnly reports an update that changes only labels and
// annotations: one apply, nothing restarts, outside maxUnavailable.
func (w UpdateWay) metadataOnly() bool { return w.InPlace && !w.Restart() && !w.Resize }

// Why a pod is recreated rather than updated in place.
const (
	WhyPolicy   = "podUpdatePolicy is Recreate"
	whyUnknown  = "the revision it runs is no longer known"
	whyTemplate = "the template changed beyond images, labels, annotations and resources"
	// WhyServiceName: spec.serviceName changed, so the pod's subdomain
	// (and, set or removed, its hostname), which a running pod cannot
	// change.
	WhyServiceName  = "spec.serviceName changed: a running pod's hostname and subdomain cannot change"
	whyNoGate       = "it was made without the " + podsetv1alpha1.InPlaceUpdateReadyCondition + " readiness gate"
	whyInfeasible   = "the kubelet reports its resize Infeasible"
	whyDeferred     = "the kubelet deferred its resize for longer than progressDeadlineSeconds"
	WhyResizeDenied = "the API server refused its resize"
	whyRestart      = "a restart was asked for (" + restartedAt + ")"
	// WhyReplace: a user asked for the pod to be replaced
	// (podsetv1alpha1.ReplaceLabel).
	WhyReplace = "a replacement was asked for (" + podsetv1alpha1.ReplaceLabel + "=true)"
	// WhySurplus: a pod outside the wanted ordinals, deleted once drained.
	WhySurplus = "it is surplus (scale-down)"
)

// restartedAt is the template annotation `kubectl rollout restart` (and
// `kubectl podset rollout restart`) sets: a new value asks for new pods,
// so it is the one annotation change that is not applied in place.
const restartedAt = "kubectl.kubernetes.io/restartedAt"

// InPlacePolicy reports whether a PodSet updates pods in place where it can.
func InPlacePolicy(ps *podsetv1alpha1.PodSet) bool {
	return ps.Spec.UpdateStrategy.PodUpdatePolicy != podsetv1alpha1.RecreateUpdatePolicy
}

// updateWayFor decides how a pod made from the template from moves to the
// template to.
func updateWayFor(ps *podsetv1alpha1.PodSet, from, to *corev1.PodTemplateSpec, pod *corev1.Pod) UpdateWay {
	switch {
	case !InPlacePolicy(ps):
		return UpdateWay{Why: WhyPolicy}
	case from == nil:
		return UpdateWay{Why: whyUnknown}
	case from.Annotations[restartedAt] != to.Annotations[restartedAt]:
		return UpdateWay{Why: whyRestart}
	case from.Spec.Subdomain != to.Spec.Subdomain || from.Spec.Hostname != to.Spec.Hostname:
		return UpdateWay{Why: WhyServiceName}
	}
	way, ok := templateDiff(&from.Spec, &to.Spec)
	switch {
	case !ok:
		return UpdateWay{Why: whyTemplate}
	case way.Restart() && !hasGate(pod):
		return UpdateWay{Why: whyNoGate}
	}
	way.InPlace = true
	return way
}

// updateWays remembers, for one pass, how pods of each revision move to
// the current one: it depends on the two templates (and on whether the pod
// has the gate), not on the pod, and comparing templates is most of what a
// pass over a thousand out-of-date pods would otherwise spend.
type updateWays map[updateKey]UpdateWay

type updateKey struct {
	hash  string
	gated bool
}

func (w updateWays) of(ps *podsetv1alpha1.PodSet, revs *Revisions, pod *corev1.Pod) UpdateWay {
	key := updateKey{pod.Labels[podsetv1alpha1.TemplateHashLabel], hasGate(pod)}
	way, ok := w[key]
	if !ok {
		way = updateWayFor(ps, revs.Templates[key.hash], revs.Templates[revs.Update], pod)
		w[key] = way
	}
	return way
}

// templateDiff reports how the pod spec from becomes to, and false if it
// differs in anything a running pod cannot change: more than container and
// init-container images and cpu and memory (the latter only for
// containers, and init containers that run as sidecars). What is left
// beyond those is what RecreateFields names.
func templateDiff(from, to *corev1.PodSpec) (UpdateWay, bool) {
	var way UpdateWay
	if len(from.Containers) != len(to.Containers) || len(from.InitContainers) != len(to.InitContainers) {
		return way, false
	}
	for list, pair := range [][2][]corev1.Container{{from.Containers, to.Containers}, {from.InitContainers, to.InitContainers}} {
		init := list == 1
		for i := range pair[0] {
			got, want := &pair[0][i], &pair[1][i]
			if got.Name != want.Name {
				return way, false
			}
			restarts := false
			if got.Image != want.Image {
				restarts = true
				way.Images = append(way.Images, want.Name)
			}
			if !equality.Semantic.DeepEqual(got.Resources, want.Resources) {
				if !resizable(got, want, init) {
					return way, false
				}
				way.Resize = true
				restarts = restarts || resizeRestarts(got.Resources, want)
			}
			if restarts {
				way.Restarts = append(way.Restarts, want.Name)
			}
		}
	}
	return way, equality.Semantic.DeepEqual(takeInPlace(from, to), to)
}

// takeInPlace is the pod spec from once it has taken from to everything a
// running pod can: the image of each container of a name to has too, and
// its cpu and memory where a resize can change them (resizable).
func takeInPlace(from, to *corev1.PodSpec) *corev1.PodSpec {
	patched := from.DeepCopy()
	for list, pair := range [][2][]corev1.Container{{patched.Containers, to.Containers}, {patched.InitContainers, to.InitContainers}} {
		for i := range pair[0] {
			got := &pair[0][i]
			j := i // a template's containers are usually in the same order
			if j >= len(pair[1]) || pair[1][j].Name != got.Name {
				j = slices.IndexFunc(pair[1], func(c corev1.Container) bool { return c.Name == got.Name })
			}
			if j < 0 {
				continue
			}
			want := &pair[1][j]
			got.Image = want.Image
			if resizable(got, want, list == 1) {
				got.Resources = want.Resources
			}
		}
	}
	return patched
}

// resizable reports whether a container's resources can go from those of
// from to those of to in place: regular containers and sidecars can, init
// containers that run to completion cannot; and only by changing or adding
// cpu and memory quantities. Removing a request or a limit, or changing any
// other resource, recreates the pod: the API server refuses it on a
// running pod, and a pass would otherwise retry it for ever. (An addition
// that changes the pod's QoS class is refused by the resize itself, which
// also recreates the pod.)
func resizable(from, to *corev1.Container, init bool) bool {
	if init && !sidecar(to) {
		return false
	}
	for _, pair := range [][2]corev1.ResourceList{{from.Resources.Requests, to.Resources.Requests}, {from.Resources.Limits, to.Resources.Limits}} {
		for name, old := range pair[0] {
			q, ok := pair[1][name]
			if !ok || !q.Equal(old) && name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				return false
			}
		}
		for name := range pair[1] {
			if _, ok := pair[0][name]; !ok && name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				return false
			}
		}
	}
	return equality.Semantic.DeepEqual(from.Resources.Claims, to.Resources.Claims)
}

// resizeRestarts reports whether a container's resizePolicy restarts it
// for a change of its resources from old to its own.
func resizeRestarts(old corev1.ResourceRequirements, c *corev1.Container) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if !old.Requests[p.ResourceName].Equal(c.Resources.Requests[p.ResourceName]) ||
			!old.Limits[p.ResourceName].Equal(c.Resources.Limits[p.ResourceName]) {
			return true
		}
	}
	return false
}

// sidecar reports whether an init container runs beside the containers.
func sidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// Describe says what an in-place update changes, for events.
func (w UpdateWay) Describe() string {
	var parts []string
	if len(w.Images) > 0 {
		parts = append(parts, "new image for "+strings.Join(w.Images, ", "))
	}
	if w.Resize {
		parts = append(parts, "resized")
	}
	if len(parts) == 0 {
		return "labels and annotations"
	}
	return strings.Join(parts, ", ")
}
