//go:build gitops

package gitops

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// TestPausedPodSetHoldsTheKustomization commits spec.paused with a new
// image: Flux applies it, the pods keep running the old image, and the
// Kustomization (wait: true) fails its health check at its timeout with
// the PodSet InProgress, as it does for a paused Deployment with a new
// template. Committing the resume rolls the image out and makes it Ready.
func TestPausedPodSetHoldsTheKustomization(t *testing.T) {
	ns := newNamespace(t, "flux-paused-")
	// Flux's shortest timeout (Kustomization.GetTimeout raises a shorter
	// one to 30 s): the health check of the paused PodSet fails only at it.
	const name, timeout = "web", 30 * time.Second
	revision := publishRevision(t, ns, name, map[string]string{"podset.yaml": podSetManifest(ns, name, imageV1, 3)})
	applyKustomization(t, ns, name, timeout, nil)
	watchUntilReady(t, ns, name, revision)
	uids := podUIDs(t, ns, name)

	revision = publishRevision(t, ns, name, map[string]string{"podset.yaml": podSetManifest(ns, name, imageV2, 3, "paused: true")})
	start := time.Now()
	ready := healthCheckFails(t, ns, name, revision)
	t.Logf("Kustomization Ready=False %s after %v (timeout %v): %s", ready.Reason, time.Since(start).Round(time.Second), timeout, ready.Message)
	if want := fmt.Sprintf("PodSet/%s/%s status: 'InProgress'", ns, name); !strings.Contains(ready.Message, want) {
		t.Errorf("the Kustomization's message %q does not say %q", ready.Message, want)
	}
	eventWith(t, ns, name, corev1.EventTypeWarning, "health check failed")
	ps := getPodSet(t, ns, name)
	c := apimeta.FindStatusCondition(ps.Status.Conditions, podsetv1alpha1.ReadyCondition)
	if !ps.Spec.Paused || ps.Status.ObservedGeneration != ps.Generation || c == nil || c.Reason != podsetv1alpha1.PausedReason {
		t.Fatalf("PodSet paused %v, observedGeneration %d of %d, Ready %+v; want paused and Ready False/Paused", ps.Spec.Paused, ps.Status.ObservedGeneration, ps.Generation, c)
	}
	t.Logf("PodSet Ready %s %s: %s", c.Status, c.Reason, c.Message)
	if err := checkPods(t.Context(), ns, name, 3, imageV1, uids); err != nil {
		t.Fatalf("while paused: %v", err)
	}

	// Resumed in Git: the image rolls out, and the Kustomization is Ready
	// once it has.
	revision = publishRevision(t, ns, name, map[string]string{"podset.yaml": podSetManifest(ns, name, imageV2, 3, "paused: false")})
	watchUntilReady(t, ns, name, revision)
	eventually(t, "3 pods on "+imageV2, func(ctx context.Context) error { return checkPods(ctx, ns, name, 3, imageV2, nil) })
}
