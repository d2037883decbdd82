package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Bounds that keep every name and label value derived from a PodSet valid.
const (
	// MaxReplicas is the largest spec.replicas the API accepts. Ordinals run
	// from 0 to MaxReplicas-1, so they have at most four digits: also with
	// spec.ordinals.start, which the API accepts only while
	// start+replicas is at most MaxReplicas.
	MaxReplicas = 10000

	// MaxNameLength is the longest PodSet name the API accepts: the pod name
	// "<name>-<ordinal>" is then at most 63 characters, a valid DNS label and
	// hostname, and the name itself fits a label value.
	MaxNameLength = 58
)

// Labels the operator puts on every pod it makes.
const (
	// NameLabel holds the name of the PodSet a pod belongs to. The manager's
	// cache holds only pods that carry it.
	NameLabel = "podset.dev/name"

	// OrdinalLabel holds a pod's ordinal, the number at the end of its name.
	OrdinalLabel = "podset.dev/ordinal"

	// TemplateHashLabel holds a hash of the pod template a pod was made from;
	// a pod whose hash differs from the PodSet's current one is out of date.
	// The ControllerRevision of that template is named "<name>-<hash>".
	TemplateHashLabel = "podset.dev/template-hash"
)

// ReplaceLabel asks the operator, set to "true" on a pod a PodSet controls,
// to replace the pod, as OpenKruise's apps.kruise.io/specified-delete
// label does for a CloneSet's: the pod is drained, deleted and made again
// under its name, from the revision it would be made from after a
// deletion, on whichever node the scheduler picks, within
// maxUnavailable (a pod that is not Ready goes at once). The new pod does
// not carry it, so setting it again on a pod being replaced changes
// nothing. `kubectl podset replace` sets it.
const ReplaceLabel = "podset.dev/replace"

// Defaults of the rollout fields, as Deployment and StatefulSet have them.
const (
	// DefaultProgressDeadlineSeconds is spec.progressDeadlineSeconds when
	// it is not set.
	DefaultProgressDeadlineSeconds = 600

	// DefaultRevisionHistoryLimit is spec.revisionHistoryLimit when it is
	// not set.
	DefaultRevisionHistoryLimit = 10
	// DefaultDrainSeconds is spec.drainSeconds when it is not set: the
	// EndpointSlice controller may follow a pod's Ready a second late
	// (its retry when its cache of slices is behind its own writes, as
	// when a rolling window takes several pods out at once), and
	// kube-proxy applies a slice within its 1 s minSyncPeriod; a third
	// second is the margin. 2 s dropped a request on the real node.
	DefaultDrainSeconds = 3
)

// PodSetUpdateStrategyType is how a PodSet replaces pods after its template
// changes.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
type PodSetUpdateStrategyType string

const (
	// RollingUpdateStrategyType replaces out-of-date pods automatically, at
	// most maxUnavailable unready pods at a time.
	RollingUpdateStrategyType PodSetUpdateStrategyType = "RollingUpdate"

	// OnDeleteStrategyType replaces an out-of-date pod only once a user
	// deletes it.
	OnDeleteStrategyType PodSetUpdateStrategyType = "OnDelete"
)

// PodUpdatePolicy is how a RollingUpdate brings an out-of-date pod to the
// current template.
// +kubebuilder:validation:Enum=InPlaceIfPossible;Recreate
type PodUpdatePolicy string

const (
	// InPlaceIfPossibleUpdatePolicy updates a pod where it runs when the new
	// template differs from the pod's only in what Kubernetes lets change on
	// a running pod: template labels and annotations (no restart, outside
	// maxUnavailable), container images (the pod leaves Service endpoints
	// through its InPlaceUpdateReadyCondition gate, its containers restart,
	// and it counts against maxUnavailable until available again) and
	// container cpu and memory (through the pods/resize subresource). Any
	// other change recreates the pod, as does a resize the kubelet reports
	// Infeasible, or Deferred for longer than progressDeadlineSeconds.
	InPlaceIfPossibleUpdatePolicy PodUpdatePolicy = "InPlaceIfPossible"

	// RecreateUpdatePolicy deletes an out-of-date pod and creates it again
	// from the current template, whatever changed.
	RecreateUpdatePolicy PodUpdatePolicy = "Recreate"
)

// InPlaceUpdateReadyCondition is the pod condition of the readiness gate
// every pod the operator makes carries. The operator sets it True once a
// pod is created, False before it stops the pod's containers (to restart
// them in place, or to delete a Ready pod), so the pod leaves Service
// endpoints first, and True again once the containers of a pod it keeps
// have restarted.
const InPlaceUpdateReadyCondition = "podset.dev/InPlaceUpdateReady"

// Reasons of the InPlaceUpdateReady condition, and of the Ready condition
// the operator writes beside a closed gate.
const (
	// GateOpenReason: no stop is under way.
	GateOpenReason = "NoUpdateInProgress"
	// GateUpdatingReason: the pod's containers restart in place once it
	// has drained.
	GateUpdatingReason = "InPlaceUpdate"
	// GateStoppingReason: the pod is deleted once it has drained.
	GateStoppingReason = "Stopping"
	// DrainingReason is the reason of the Ready condition False the
	// operator writes in the same request as it closes a pod's gate, so
	// the pod leaves EndpointSlices without waiting for its kubelet; the
	// kubelet then reports it not Ready with its own reason.
	DrainingReason = "PodSetDraining"
)

// PodSetSpec is the desired state of a PodSet.
// +kubebuilder:validation:XValidation:rule="!has(self.ordinals) || !has(self.ordinals.start) || (has(self.replicas) ? self.replicas : 1) + self.ordinals.start <= 10000",message="spec.ordinals.start: start + replicas must be at most 10000, so that the highest ordinal has at most four digits and pod names <name>-<ordinal> stay valid DNS labels",fieldPath=".ordinals.start"
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadlineSeconds) || !has(self.minReadySeconds) || self.progressDeadlineSeconds > self.minReadySeconds",message="spec.progressDeadlineSeconds: must be greater than spec.minReadySeconds",fieldPath=".progressDeadlineSeconds"
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadlineSeconds) || !has(self.drainSeconds) || self.progressDeadlineSeconds > self.drainSeconds",message="spec.drainSeconds: must be less than spec.progressDeadlineSeconds, or every pod the operator stops would count as a stalled rollout",fieldPath=".drainSeconds"
// +kubebuilder:validation:XValidation:rule="!has(self.drainSeconds) || self.drainSeconds <= (has(self.template.spec) && has(self.template.spec.terminationGracePeriodSeconds) ? self.template.spec.terminationGracePeriodSeconds : 30)",message="spec.drainSeconds: must be at most spec.template.spec.terminationGracePeriodSeconds (30 when unset): every container without a preStop hook of its own sleeps drainSeconds in a preStop hook when its pod stops, within the pod's termination grace period; raise terminationGracePeriodSeconds or lower drainSeconds",fieldPath=".drainSeconds"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || !has(self.updateStrategy.inPlaceDrainSeconds) || self.updateStrategy.inPlaceDrainSeconds <= (has(self.drainSeconds) ? self.drainSeconds : 3)",message="spec.updateStrategy.inPlaceDrainSeconds is replaced by spec.drainSeconds, which drains every pod the operator stops (scale-down and recreation as well as in-place restarts): write spec.drainSeconds with this value and remove inPlaceDrainSeconds",fieldPath=".updateStrategy.inPlaceDrainSeconds"
// +kubebuilder:validation:XValidation:rule="!has(self.serviceName) || size(self.serviceName) == 0 || !has(self.template.spec) || ((!has(self.template.spec.hostname) || size(self.template.spec.hostname) == 0) && (!has(self.template.spec.subdomain) || size(self.template.spec.subdomain) == 0 || self.template.spec.subdomain == self.serviceName))",message="spec.template.spec.hostname and spec.template.spec.subdomain: with spec.serviceName set, hostname must be unset and subdomain unset or equal to spec.serviceName: every pod gets hostname = its own name and subdomain = spec.serviceName",fieldPath=".template.spec"
type PodSetSpec struct {
	// replicas is the number of pods to keep running, named
	// <name>-<start> to <name>-<start+replicas-1>, where start is
	// spec.ordinals.start (0 unless set). Zero scales the PodSet down to no
	// pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// ordinals numbers the pods from another ordinal than 0, as a
	// StatefulSet's spec.ordinals does.
	// +optional
	Ordinals *PodSetOrdinals `json:"ordinals,omitempty"`

	// template is the pod template every pod is made from. The operator adds
	// its own labels, an owner reference and the Pod Security "restricted"
	// settings the template leaves unset; a template that asks for less than
	// that profile allows is refused.
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="spec.template.spec.containers: must list at least one container",fieldPath=".spec"
	// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.name) || size(self.metadata.name) == 0",message="spec.template.metadata.name: must not be set; pods are named <name>-<ordinal>",fieldPath=".metadata"
	Template corev1.PodTemplateSpec `json:"template"`

	// serviceName gives every pod a DNS name through a headless Service of
	// this name in the PodSet's namespace, as a StatefulSet's serviceName
	// does: each pod gets hostname = its own name and subdomain =
	// serviceName, so the EndpointSlice controller publishes each pod's
	// hostname in that Service's EndpointSlices and cluster DNS answers
	// <pod>.<serviceName>.<namespace>.svc.<cluster domain> with the pod's
	// IP. The Service must be headless (clusterIP: None) and select the
	// pods; the operator neither creates nor requires it: while no Service
	// of this name exists the pods run as usual and no per-pod name
	// resolves. A pod's hostname and subdomain cannot change while it runs,
	// so setting, changing or removing serviceName recreates every pod (a
	// rollout within maxUnavailable, each pod drained first), whatever
	// podUpdatePolicy says; an in-place update keeps them. It must be a
	// DNS-1123 label (at most 63 characters). spec.template.spec.hostname
	// and subdomain must then be unset (or subdomain equal serviceName).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.serviceName: must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters): it is the subdomain of every pod's DNS name <pod>.<serviceName>.<namespace>.svc"
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// updateStrategy is how pods are replaced after the template changes.
	// +kubebuilder:default={type: RollingUpdate}
	// +optional
	UpdateStrategy PodSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// paused stops rollouts: while it is true, no pod is updated in place
	// or recreated because the template changed, and a template change
	// only records a new revision. Everything else goes on: scaling up and
	// down, the repair of deleted or failed pods, lost-node replacement,
	// and the drain of every pod the operator stops. A pod made while
	// paused starts from the revision it ran before (a deleted or failed
	// pod), or from status.currentRevision, the revision the oldest pods
	// run (a new ordinal), as a paused Deployment scales its existing
	// ReplicaSets and creates no new one; a PodSet created paused makes
	// its pods from its template, the only revision there is. The Ready
	// condition is False with reason Paused while pods wait for the
	// template, and Stalled stays False: the progress deadline does not
	// run while paused. Setting it back to false (or removing it) rolls
	// out what is pending. `kubectl podset rollout pause` and `resume` set
	// it. Defaults to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// disruptionBudget makes the operator keep a policy/v1
	// PodDisruptionBudget for the PodSet's pods: named like the PodSet,
	// selecting the pods by the podset.dev/name label, controlled by the
	// PodSet (so it is garbage collected with it), updated when this field
	// changes and deleted when it is removed. Evictions (kubectl drain, the
	// cluster autoscaler, the eviction API) then honour it; the operator's
	// own deletes (scale-down, rollouts) do not go through evictions. A
	// PodDisruptionBudget of that name that this PodSet does not control is
	// left alone, and the PodSet is Stalled with reason
	// DisruptionBudgetConflict until it is deleted or renamed.
	// +optional
	DisruptionBudget *PodSetDisruptionBudget `json:"disruptionBudget,omitempty"`

	// minReadySeconds is how long a pod must have been Ready, without any
	// of its containers crashing, before it counts as available. A rollout
	// takes the next pod only once the new ones are available, and Ready is
	// True only when every desired pod is. Defaults to 0: available as soon
	// as Ready.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// drainSeconds is how long a pod stays out of Service endpoints before
	// its containers stop, whoever stops it. Dataplanes program an
	// EndpointSlice change later than it is written (kube-proxy within
	// about a second, external load balancers and service meshes often
	// later): new connections routed to the pod meanwhile would meet a
	// stopped container.
	//
	// Every container and sidecar without a preStop hook of its own gets a
	// preStop sleep of drainSeconds, so a pod that is evicted (kubectl
	// drain, the cluster autoscaler, Karpenter), deleted (kubectl delete
	// pod) or stopped by its node's graceful shutdown keeps serving the
	// requests it has while the EndpointSlice controller lists it as
	// terminating, and its containers get SIGTERM drainSeconds later,
	// whether the operator runs or not. An app's own preStop hook is kept
	// as it is. Before it restarts a pod's containers in place, and before
	// it deletes a Ready pod whose containers do not all sleep that long
	// (made by an earlier release, or before drainSeconds grew), the
	// operator closes the pod's readiness gate (podset.dev/InPlaceUpdateReady)
	// so the pod leaves EndpointSlices first, and waits for the kubelet to
	// report it not Ready (and, without the hooks, drainSeconds more). An
	// app needs no preStop sleep of its own. A pod made before drainSeconds
	// changed keeps the sleep it was made with until it is recreated.
	// Raise it for slower dataplanes; 0 gives no hook and stops a pod as
	// soon as it has left its Services. It must be less than
	// progressDeadlineSeconds and at most the template's
	// terminationGracePeriodSeconds, within which the kubelet runs the
	// hook. Defaults to 3.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	DrainSeconds *int32 `json:"drainSeconds,omitempty"`

	// progressDeadlineSeconds is how long a PodSet that is not Ready may go
	// without progress (a pod created, updated or newly available) before
	// it is reported Stalled with reason ProgressDeadlineExceeded, naming
	// the stuck pods and why Kubernetes says they are stuck. The operator
	// keeps working meanwhile, and the PodSet recovers by itself once
	// progress resumes. It must be greater than minReadySeconds. Defaults
	// to 600.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// revisionHistoryLimit is how many old template revisions are kept as
	// ControllerRevisions, besides the ones pods still run (which are never
	// deleted), for partitioned rollouts and rollbacks. Defaults to 10.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// lostNodeReplacement, when set, replaces pods whose node has been lost
	// for afterSeconds: unreachable (its Ready condition Unknown, or the
	// node.kubernetes.io/unreachable taint) or NotReady. The operator
	// force-deletes such a pod (grace period 0), which frees its name even
	// when the node never confirms the deletion, and creates it again, so
	// the scheduler places it on a healthy node. A node that is cut off but
	// still runs its pod then runs a second copy until it is back and its
	// kubelet stops the old one: set it only for pods that tolerate that
	// (stateless ones). Unset (the default), a pod on a lost node keeps its
	// name until the node comes back or is deleted, as a StatefulSet's does.
	// +optional
	LostNodeReplacement *LostNodeReplacement `json:"lostNodeReplacement,omitempty"`
}

// Bounds of spec.lostNodeReplacement.afterSeconds.
const (
	// DefaultLostNodeAfterSeconds is spec.lostNodeReplacement.afterSeconds
	// when it is not set: the 300 seconds pods tolerate an unreachable node
	// by default before the node lifecycle controller evicts them.
	DefaultLostNodeAfterSeconds = 300

	// MaxLostNodeAfterSeconds is the longest afterSeconds the API accepts:
	// one day.
	MaxLostNodeAfterSeconds = 86400
)

// LostNodeReplacement says when pods of a lost node are replaced.
type LostNodeReplacement struct {
	// afterSeconds is how long a pod's node must have been lost before the
	// pod is replaced, counted from the node's Ready condition turning
	// Unknown or False (its lastTransitionTime) or from the
	// node.kubernetes.io/unreachable taint being added, whichever is
	// earlier. A node is marked Unknown only once it missed heartbeats for
	// the node lifecycle controller's grace period (40 to 50 seconds by
	// default), so 0 replaces pods as soon as a node is marked lost.
	// Defaults to 300.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	AfterSeconds *int32 `json:"afterSeconds,omitempty"`
}

// PodSetDisruptionBudget is the PodDisruptionBudget the operator keeps for a
// PodSet's pods: exactly one of maxUnavailable and minAvailable, as a
// PodDisruptionBudget's spec has them.
// +kubebuilder:validation:XValidation:rule="has(self.maxUnavailable) != has(self.minAvailable)",message="spec.disruptionBudget: exactly one of maxUnavailable and minAvailable must be set"
type PodSetDisruptionBudget struct {
	// maxUnavailable is the most pods that an eviction may leave
	// unavailable: a number of at least 0 or a percentage from 0% to 100%
	// of the pods (rounded up, as the disruption controller does). 0
	// refuses every eviction.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.disruptionBudget.maxUnavailable: must be an integer of at least 0 or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// minAvailable is the fewest pods that must stay available after an
	// eviction: a number of at least 0 or a percentage from 0% to 100% of
	// spec.replicas (rounded up). 100% refuses every eviction.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="spec.disruptionBudget.minAvailable: must be an integer of at least 0 or a percentage from 0% to 100%"
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// PodSetOrdinals is how a PodSet numbers its pods.
type PodSetOrdinals struct {
	// start is the ordinal of the first pod: the pods are <name>-<start> to
	// <name>-<start+replicas-1>. Changing it moves the set: pods outside the
	// new range are deleted (highest ordinal first) and the missing ones are
	// created, in the same pass, as a StatefulSet with podManagementPolicy
	// Parallel does; a set can so be split or moved across clusters and
	// namespaces ordinal by ordinal. The partition counts from start, as a
	// StatefulSet's does. start + replicas must be at most 10000. Defaults
	// to 0.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999
	// +optional
	Start int32 `json:"start"`
}

// PodSetUpdateStrategy is how a PodSet replaces pods after its template
// changes.
// +kubebuilder:validation:XValidation:rule="self.type == 'RollingUpdate' || !has(self.rollingUpdate)",message="spec.updateStrategy.rollingUpdate: may only be set when spec.updateStrategy.type is RollingUpdate"
type PodSetUpdateStrategy struct {
	// type is RollingUpdate (the default) or OnDelete.
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type PodSetUpdateStrategyType `json:"type,omitempty"`

	// podUpdatePolicy is how a RollingUpdate updates a pod:
	// InPlaceIfPossible (the default) changes images, template labels and
	// annotations, and cpu and memory where the pod runs, keeping its node,
	// IP and volumes, and recreates it for anything else; Recreate always
	// deletes and recreates it. Pods made under InPlaceIfPossible carry the
	// readiness gate podset.dev/InPlaceUpdateReady.
	// +kubebuilder:default=InPlaceIfPossible
	// +optional
	PodUpdatePolicy PodUpdatePolicy `json:"podUpdatePolicy,omitempty"`

	// inPlaceDrainSeconds is deprecated: spec.drainSeconds replaced it and
	// drains every pod the operator stops, not only those restarted in
	// place. It is accepted only when at most spec.drainSeconds (so a
	// manifest that sets it to the old default, 2, keeps working, and the
	// drain is spec.drainSeconds); a longer one is refused with a message
	// saying to write spec.drainSeconds. A PodSet stored before with a
	// longer value drains for it until its spec next changes.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	InPlaceDrainSeconds *int32 `json:"inPlaceDrainSeconds,omitempty"`

	// rollingUpdate tunes the RollingUpdate strategy.
	// +optional
	RollingUpdate *RollingUpdatePodSet `json:"rollingUpdate,omitempty"`
}

// RollingUpdatePodSet tunes the RollingUpdate strategy.
type RollingUpdatePodSet struct {
	// maxUnavailable is the most pods that may be unready at once while out-
	// of-date pods are replaced: a number of at least 1, or a percentage of
	// replicas (rounded down, but at least one pod).
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="spec.updateStrategy.rollingUpdate.maxUnavailable: must be an integer of at least 1 or a percentage from 1% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// partition stages a rollout: only pods with an ordinal at or above
	// spec.ordinals.start + partition take a new template (the partition
	// counts pods from the first ordinal, as a StatefulSet's does); the
	// pods below keep the revision they run, also when they are recreated
	// after a deletion or a failure. Lowering it continues the rollout.
	// Defaults to 0: every pod is updated.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Partition *int32 `json:"partition,omitempty"`
}

// PodSetStatus is the observed state of a PodSet.
type PodSetStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// replicas is the number of pods that exist and are controlled by this
	// PodSet, terminating ones included.
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas is the number of controlled, live pods with the Ready
	// condition.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// availableReplicas is the number of controlled, live pods that have
	// been ready for at least spec.minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`

	// updatedReplicas is the number of controlled, live pods made from the
	// current template (updateRevision).
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`

	// currentRevision is the ControllerRevision ("<name>-<template hash>")
	// that the oldest desired pods run. It equals updateRevision once every
	// pod is updated.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`

	// updateRevision is the ControllerRevision of the current template.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`

	// lastProgressTime is when the PodSet last made progress: a new spec
	// observed, a pod created, updated or newly available, or Ready lost.
	// spec.progressDeadlineSeconds counts from it. It lives in the status so
	// that an operator restart or a leader change keeps the clock.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`

	// podNames lists the controlled, live (not terminating) pods by ordinal.
	// +listType=atomic
	// +optional
	PodNames []string `json:"podNames,omitempty"`

	// lostNodeReplacements is how many pods the operator has force-deleted
	// to replace them because their node was lost
	// (spec.lostNodeReplacement), over the PodSet's life. The metric
	// podset_operator_lost_node_replacements_total counts the same.
	// +optional
	LostNodeReplacements int32 `json:"lostNodeReplacements,omitempty"`

	// selector is the label selector of this PodSet's pods, as a string, for
	// the scale subresource (kubectl scale, HorizontalPodAutoscaler).
	// +optional
	Selector string `json:"selector,omitempty"`

	// conditions are Ready, Reconciling and Stalled, following kstatus.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// PodSet keeps a number of pods with stable names, <name>-<start> to
// <name>-<start+replicas-1> (start is spec.ordinals.start, 0 unless set),
// running from one pod template.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=ps,categories=all
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.updatedReplicas`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Containers",type=string,JSONPath=`.spec.template.spec.containers[*].name`,priority=1
// +kubebuilder:printcolumn:name="Images",type=string,JSONPath=`.spec.template.spec.containers[*].image`,priority=1
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.status.selector`,priority=1
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 58",message="metadata.name: must be at most 58 characters, so that pod names <name>-<ordinal> are valid DNS labels"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit), so that pod names and label values derived from it are valid"
type PodSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec PodSetSpec `json:"spec"`

	// status is the observed state, written by the operator only. It
	// defaults to observedGeneration 0, so that before the operator's first
	// pass kstatus (Flux, kubectl wait) sees a PodSet in progress, not
	// current.
	// +kubebuilder:default={observedGeneration: 0}
	// +optional
	Status PodSetStatus `json:"status,omitempty"`
}

// PodSetList is a list of PodSets.
//
// +kubebuilder:object:root=true
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSet `json:"items"`
}
