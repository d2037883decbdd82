package controller

import (
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// Events. Their reasons are the API's condition and event reasons
// (apis/v1alpha1/conditions.go); their action says what the operator did:
// Create, Delete, Drain, Update, Apply, Observe, Validate or Rollout.

// note records a Normal event of something the operator did.
func (r *PodSetReconciler) note(ps *podsetv1alpha1.PodSet, reason, action, format string, args ...any) {
	r.Recorder.Eventf(ps, nil, corev1.EventTypeNormal, reason, action, format, args...)
}

// warn records a Warning event: something a user must act on.
func (r *PodSetReconciler) warn(ps *podsetv1alpha1.PodSet, reason, action, message string) {
	r.Recorder.Eventf(ps, nil, corev1.EventTypeWarning, reason, action, "%s", eventNote(message))
}

// maxEventNote is the longest note the events.k8s.io API accepts, in bytes.
const maxEventNote = 1024

// eventNote is a message as an event's note: whole if it fits, else cut at
// a character boundary with an ellipsis. The API server refuses a longer
// note, and the event would be lost; the condition keeps the whole message.
func eventNote(message string) string {
	if len(message) <= maxEventNote {
		return message
	}
	const ellipsis = "…"
	cut := maxEventNote - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + ellipsis
}
