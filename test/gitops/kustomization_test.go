//go:build gitops

package gitops

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// testManager is the field manager of what the suite itself applies (the
// Kustomization, the GitRepository's spec).
const testManager = "podset-gitops-test"

// wait bounds every wait of the suite: it only turns a hang into a
// failure, on a loaded two-core machine that runs a whole control plane.
var (
	wait       = testenv.Waiter{Timeout: 3 * time.Minute, Interval: 250 * time.Millisecond, Log: true}
	eventually = wait.Eventually
)

// kustomization is what the tests read of a Kustomization: its status,
// as the Flux CLI shows it.
type kustomization struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Status   struct {
		ObservedGeneration     int64              `json:"observedGeneration"`
		LastAppliedRevision    string             `json:"lastAppliedRevision"`
		LastAttemptedRevision  string             `json:"lastAttemptedRevision"`
		LastHandledReconcileAt string             `json:"lastHandledReconcileAt"`
		Conditions             []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

// ready is the Kustomization's Ready condition (zero when missing).
func (k *kustomization) ready() metav1.Condition {
	if c := apimeta.FindStatusCondition(k.Status.Conditions, "Ready"); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// readyAt is whether the Kustomization is Ready, having applied revision,
// at its generation.
func (k *kustomization) readyAt(revision string) bool {
	return k.ready().Status == metav1.ConditionTrue && k.Status.LastAppliedRevision == revision &&
		k.Status.ObservedGeneration == k.Metadata.Generation
}

// getKustomization reads the Kustomization ns/name.
func getKustomization(ctx context.Context, ns, name string) (*kustomization, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	u.SetKind("Kustomization")
	if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil, err
	}
	k := &kustomization{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, k); err != nil {
		return nil, err
	}
	return k, nil
}

// applyKustomization applies the Kustomization ns/name of the GitRepository
// of the same name: the revision's root, pruned, every object waited on
// (wait: true) for at most timeout, reconciled every hour (the tests ask
// for a reconcile when they want one), with the fields of extra added to
// its spec.
func applyKustomization(t *testing.T, ns, name string, timeout time.Duration, extra map[string]any) {
	t.Helper()
	spec := map[string]any{
		"interval":  "1h",
		"path":      "./",
		"prune":     true,
		"wait":      true,
		"timeout":   timeout.String(),
		"sourceRef": map[string]any{"kind": "GitRepository", "name": name},
	}
	maps.Copy(spec, extra)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
	if err := suite.client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(testManager), client.ForceOwnership); err != nil {
		t.Fatalf("applying Kustomization %s/%s: %v", ns, name, err)
	}
}

// reconcile asks the kustomize-controller to reconcile the Kustomization
// ns/name now, as `flux reconcile kustomization` does (the annotation
// reconcile.fluxcd.io/requestedAt), and waits until it has handled the
// request and is Ready at revision.
func reconcile(t *testing.T, ns, name, revision string) *kustomization {
	t.Helper()
	requested := time.Now().Format(time.RFC3339Nano)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	u.SetKind("Kustomization")
	u.SetNamespace(ns)
	u.SetName(name)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, requested)
	if err := suite.client.Patch(t.Context(), u, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("requesting a reconcile of Kustomization %s/%s: %v", ns, name, err)
	}
	var k *kustomization
	eventually(t, "Kustomization "+ns+"/"+name+" handled the reconcile requested at "+requested, func(ctx context.Context) error {
		var err error
		if k, err = getKustomization(ctx, ns, name); err != nil {
			return err
		}
		if k.Status.LastHandledReconcileAt != requested {
			return fmt.Errorf("lastHandledReconcileAt %q", k.Status.LastHandledReconcileAt)
		}
		if !k.readyAt(revision) {
			return fmt.Errorf("not Ready at %s: %+v", revision, k.ready())
		}
		return nil
	})
	return k
}

// kustomizationEvents returns the Kubernetes events of the Kustomization
// ns/name, oldest first.
func kustomizationEvents(t *testing.T, ns, name string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := suite.client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var events []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Kustomization" && e.InvolvedObject.Name == name {
			events = append(events, e)
		}
	}
	slices.SortFunc(events, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return events
}

// eventTime is when an event last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	default:
		return e.EventTime.Time
	}
}

// eventWith waits for an event of the Kustomization ns/name of type typ
// whose message contains every part, logs it and returns its message.
func eventWith(t *testing.T, ns, name, typ string, parts ...string) string {
	t.Helper()
	var found string
	eventually(t, fmt.Sprintf("a %s event of Kustomization %s/%s saying %q", typ, ns, name, parts), func(context.Context) error {
		for _, e := range kustomizationEvents(t, ns, name) {
			if e.Type == typ && containsAll(e.Message, parts) {
				found = fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	t.Logf("event: %s", found)
	return found
}

// containsAll is whether s contains every part.
func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// healthCheckFails waits until the Kustomization ns/name has failed its
// health check at revision, and returns its Ready condition.
func healthCheckFails(t *testing.T, ns, name, revision string) metav1.Condition {
	t.Helper()
	var ready metav1.Condition
	eventually(t, "Kustomization "+ns+"/"+name+" fails its health check", func(ctx context.Context) error {
		k, err := getKustomization(ctx, ns, name)
		if err != nil {
			return err
		}
		ready = k.ready()
		if ready.Status != metav1.ConditionFalse || ready.Reason != "HealthCheckFailed" || k.Status.LastAttemptedRevision != revision {
			return fmt.Errorf("Ready %s %s: %s", ready.Status, ready.Reason, ready.Message)
		}
		return nil
	})
	return ready
}
