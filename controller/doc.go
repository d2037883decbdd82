// Package controller reconciles PodSets: it keeps the pods <name>-<start>
// to <name>-<start+replicas-1> (start: spec.ordinals.start, 0 unless set)
// running from the PodSet's template, purely through
// server-side apply with one field manager. The decisions are the pure
// core's (internal/podset); this package reads the cache, keeps the
// operator's memory of each PodSet and sends the writes. One pass, phase by
// phase, is in pass.go; docs/architecture.md walks through it.
package controller
