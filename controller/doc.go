// Package controller reconciles PodSets: it keeps the pods <name>-0 to
// <name>-<replicas-1> running from the PodSet's template, purely through
// server-side apply with one field manager.
package controller
