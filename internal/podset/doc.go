// Package podset is the operator's pure core: what a PodSet's pods should
// be and what one pass does about the pods there are. It has no client, no
// clock of its own and no globals: a pass sorts the pods once into a View
// (NewView) and reads the plan, the revisions to keep, the status and the
// wake-up time off it. The reconciler (package controller) and the kubectl
// plugin call it; its tests need no API server.
package podset
