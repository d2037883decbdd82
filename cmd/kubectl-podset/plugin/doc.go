// Package plugin implements `kubectl podset`, the kubectl plugin for
// PodSets. kubectl's own `rollout` commands know only the built-in
// workloads; these do for a PodSet what they do for a StatefulSet (status,
// history, undo) and a Deployment (restart), reading the PodSet's status
// and its ControllerRevisions. rollout preview goes further than kubectl
// diff: it runs the operator's planner (internal/podset) over a dry run of
// a new manifest and says what the rollout will do to each pod.
package plugin
