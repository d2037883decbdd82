// Package plugin implements `kubectl podset`, the kubectl plugin for
// PodSets. kubectl's own `rollout` commands know only the built-in
// workloads; these do for a PodSet what they do for a StatefulSet (status,
// history, undo) and a Deployment (restart), reading the PodSet's status
// and its ControllerRevisions.
package plugin
