package v1alpha1

// Condition types, following kstatus so that kubectl wait, Argo CD and Flux
// read a PodSet's health without custom code.
const (
	// ReadyCondition is True when every desired pod exists and is available
	// (ready for minReadySeconds), and every pod the update strategy updates
	// runs the current template: all of them under RollingUpdate, those at
	// or above the partition with one, none under OnDelete.
	ReadyCondition = "Ready"

	// ReconcilingCondition is True while the operator is converging the pods
	// towards the spec.
	ReconcilingCondition = "Reconciling"

	// StalledCondition is True when the operator cannot make progress until
	// someone changes something; its reason and message say what.
	StalledCondition = "Stalled"
)

// Condition reasons.
const (
	// ReadyReason: every desired pod exists, is available and, as far as
	// the update strategy updates it, up to date.
	ReadyReason = "AllReplicasReady"

	// NotReadyReason: some desired pod is missing, out of date or unready.
	NotReadyReason = "ReplicasNotReady"

	// ScalingUpReason: pods are being created.
	ScalingUpReason = "ScalingUp"

	// ScalingDownReason: surplus pods are being deleted.
	ScalingDownReason = "ScalingDown"

	// RollingOutReason: out-of-date pods are being replaced.
	RollingOutReason = "RollingOut"

	// WaitingForPodsReason: the pods exist and are up to date; the operator
	// waits for them to become ready or finish terminating.
	WaitingForPodsReason = "WaitingForPods"

	// ConvergedReason: nothing is left to do.
	ConvergedReason = "Converged"

	// PausedReason: spec.paused is true and pods run an older template:
	// every desired pod exists and is available, and only the rollout the
	// pause holds back is left. Ready, Reconciling and Stalled are all
	// False with this reason; resuming rolls the pods out.
	PausedReason = "Paused"

	// InvalidTemplateReason: the pod template asks for something the
	// operator refuses (it weakens the Pod Security "restricted" profile).
	InvalidTemplateReason = "InvalidTemplate"

	// PodRejectedReason: the API server refused a pod made from the template
	// (invalid, or forbidden by admission such as PodSecurity).
	PodRejectedReason = "PodRejected"

	// PodConflictReason: a pod with a name this PodSet needs exists and is
	// not controlled by it; the operator leaves it alone.
	PodConflictReason = "PodConflict"

	// DisruptionBudgetConflictReason: spec.disruptionBudget is set and a
	// PodDisruptionBudget named like the PodSet exists that the PodSet does
	// not control; the operator leaves it alone.
	DisruptionBudgetConflictReason = "DisruptionBudgetConflict"

	// ProgressDeadlineExceededReason: the PodSet is not Ready and made no
	// progress for spec.progressDeadlineSeconds; the message names the
	// stuck pods and what Kubernetes reports about them. The operator keeps
	// working, and the condition clears once progress resumes.
	ProgressDeadlineExceededReason = "ProgressDeadlineExceeded"
)

// Event reasons besides the condition reasons above, which events use too
// (ScalingUp, RollingOut, InvalidTemplate, PodRejected, PodConflict,
// ProgressDeadlineExceeded).
const (
	// ReplacingFinishedReason: Failed or Succeeded pods were deleted to be
	// created again.
	ReplacingFinishedReason = "ReplacingFinished"

	// ReplacingRequestedReason: pods that carry the podset.dev/replace=true
	// label (kubectl podset replace) were drained and deleted, to be made
	// again under their names.
	ReplacingRequestedReason = "ReplacingRequested"

	// ReplacingLostReason: pods whose node has been lost for
	// spec.lostNodeReplacement.afterSeconds were force-deleted to be
	// created again on a healthy node (a Warning: a node that still runs
	// such a pod runs a second copy until it is back).
	ReplacingLostReason = "ReplacingLost"

	// LostNodeReplacementPausedReason: pods sit on lost nodes, but so many
	// of the cluster's nodes are lost that the control plane more likely
	// lost them than they their pods; no pod is replaced until fewer are.
	LostNodeReplacementPausedReason = "LostNodeReplacementPaused"

	// UpdatedInPlaceReason: pods were updated where they run, or taken out
	// of Ready to restart their containers in place.
	UpdatedInPlaceReason = "UpdatedInPlace"

	// RepairedReason: fields the operator owns on pods had drifted and were
	// restored.
	RepairedReason = "Repaired"

	// DisruptionBudgetAppliedReason: the PodDisruptionBudget of
	// spec.disruptionBudget was created or updated.
	DisruptionBudgetAppliedReason = "DisruptionBudgetApplied"

	// DisruptionBudgetDeletedReason: spec.disruptionBudget was removed, and
	// the PodDisruptionBudget the PodSet controlled with it deleted.
	DisruptionBudgetDeletedReason = "DisruptionBudgetDeleted"

	// StrayPodsReason: pods carry the PodSet's name label but are not
	// controlled by it; they are neither counted nor touched.
	StrayPodsReason = "StrayPods"
)
