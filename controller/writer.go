package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// writer is the one seam every write of the operator goes through: pods
// applied (created, updated, resized), pod conditions patched, the
// PodSet's status, its ControllerRevisions and its PodDisruptionBudget
// applied, objects deleted, and events. Nothing else in the reconciler
// holds a client that writes: its Client and APIReader are readers.
// apiWriter is the one that talks to the API server, with the operator's
// field manager on every write;
// writer_test.go's recordingWriter records the writes for the tests of
// execute and of a pass's events, which need no control plane.
//
// The layer above it (send, sendPod, deletePod and patchConditions in
// writes.go and updates.go) counts each write and remembers what it
// expects the cache to show.
type writer interface {
	// applyPod applies ac to its pod, or to the pod's subresource
	// ("resize"), with ownership of every field it sends, and returns the
	// pod written.
	applyPod(ctx context.Context, ac *corev1ac.PodApplyConfiguration, subresource string) (*corev1.Pod, error)
	// apply applies ac (a PodSet's status, a PodDisruptionBudget) to its
	// object, or to the object's subresource ("status"), with ownership
	// of every field it sends, and returns the object's resourceVersion
	// after the write.
	apply(ctx context.Context, ac runtime.ApplyConfiguration, subresource string) (resourceVersion string, err error)
	// create creates obj (a new ControllerRevision), which fails with
	// AlreadyExists if its name is taken.
	create(ctx context.Context, obj client.Object) error
	// patch sends p to obj (a ControllerRevision's new number).
	patch(ctx context.Context, obj client.Object, p client.Patch) error
	// patchPodStatus sends a strategic merge patch to a pod's status and
	// returns the pod written.
	patchPodStatus(ctx context.Context, namespace, name string, patch []byte) (*corev1.Pod, error)
	// delete deletes obj with opts (the callers' preconditions).
	delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
	// event records an event about a PodSet.
	event(ps *podsetv1alpha1.PodSet, e podSetEvent)
}

// podSetEvent is one event about a PodSet: its type (Normal or Warning), its
// reason (apis/v1alpha1/conditions.go), what the operator did (action) and
// the note, already cut to fit (eventNote).
type podSetEvent struct {
	Type, Reason, Action, Note string
}

// apiWriter writes to the API server as the operator's field manager.
type apiWriter struct {
	// client sends the applies of everything but pods, answered as
	// metadata, and the deletions of everything but pods.
	client client.Client
	// pods sends the pod applies, patches and deletions, answered in protobuf
	// (podClient): controller-runtime's Apply asks for JSON and decodes the
	// whole pod into the apply configuration, which took about 8% of the
	// operator's CPU creating 1000 PodSets of one pod (docs/benchmarks.md).
	pods corev1client.PodsGetter
	// recorder emits events through the events.k8s.io API.
	recorder events.EventRecorder
}

var _ writer = apiWriter{}

// WriteOptions are the options of every apply (force: it takes ownership)
// and every patch the operator sends; the benchmark's limits send them
// too. Field validation is off: the bodies are marshalled from typed Go
// values, so it could find nothing in them, and the API server's default
// (Warn) parses every apply's body a second time, strictly, for duplicate
// fields (its applyPatcher): 0.35 to 0.6 ms of its CPU per apply on the
// benchmark's machine, about 2% of all it spends creating pods
// (docs/benchmarks/history/2026-12-01-issue39-field-validation.md). An
// apply's unknown field is refused all the same, by the schema its field
// manager converts it with (TestApplyIgnoringFieldValidation pins that on
// the API server).
func WriteOptions(force bool) metav1.PatchOptions {
	opts := metav1.PatchOptions{FieldManager: FieldManager, FieldValidation: metav1.FieldValidationIgnore}
	if force {
		opts.Force = ptr.To(true)
	}
	return opts
}

func (w apiWriter) applyPod(ctx context.Context, ac *corev1ac.PodApplyConfiguration, subresource string) (*corev1.Pod, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return nil, err
	}
	var subresources []string
	if subresource != "" {
		subresources = []string{subresource}
	}
	return w.pods.Pods(ptr.Deref(ac.Namespace, "")).Patch(ctx, ptr.Deref(ac.Name, ""), types.ApplyPatchType, data, WriteOptions(true), subresources...)
}

// applied is what apply needs of an apply configuration: the object it
// is of. Every generated one has it.
type applied interface {
	GetAPIVersion() *string
	GetKind() *string
	GetName() *string
	GetNamespace() *string
}

func (w apiWriter) apply(ctx context.Context, ac runtime.ApplyConfiguration, subresource string) (string, error) {
	of, ok := ac.(applied)
	if !ok {
		return "", fmt.Errorf("apply configuration %T names no object", ac)
	}
	data, err := json.Marshal(ac)
	if err != nil {
		return "", err
	}
	// The answer is decoded as metadata only: the resourceVersion is all
	// the operator reads of it.
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(ptr.Deref(of.GetAPIVersion(), ""), ptr.Deref(of.GetKind(), "")))
	obj.SetName(ptr.Deref(of.GetName(), ""))
	obj.SetNamespace(ptr.Deref(of.GetNamespace(), ""))
	patch := client.RawPatch(types.ApplyPatchType, data)
	o := WriteOptions(true)
	owner, validation := client.FieldOwner(o.FieldManager), client.FieldValidation(o.FieldValidation)
	if subresource == "" {
		err = w.client.Patch(ctx, obj, patch, owner, client.ForceOwnership, validation)
	} else {
		err = w.client.SubResource(subresource).Patch(ctx, obj, patch, owner, client.ForceOwnership, validation)
	}
	return obj.ResourceVersion, err
}

// create sends a POST: for an object written once and never changed but
// its revision number, such as a ControllerRevision, the create does what
// an apply that can only create does for less of the API server's CPU
// (0.7-0.8 ms against 1.2-1.4 ms per ControllerRevision, measured side by
// side: docs/benchmarks/history/2026-12-03-issue39-prices-per-request.md).
func (w apiWriter) create(ctx context.Context, obj client.Object) error {
	return w.client.Create(ctx, obj, client.FieldOwner(FieldManager), client.FieldValidation(metav1.FieldValidationIgnore))
}

func (w apiWriter) patch(ctx context.Context, obj client.Object, p client.Patch) error {
	return w.client.Patch(ctx, obj, p, client.FieldOwner(FieldManager), client.FieldValidation(metav1.FieldValidationIgnore))
}

func (w apiWriter) patchPodStatus(ctx context.Context, namespace, name string, patch []byte) (*corev1.Pod, error) {
	// The gate's writes go before the other requests waiting for a slot
	// (limitInFlight).
	return w.pods.Pods(namespace).Patch(withUrgency(ctx), name, types.StrategicMergePatchType, patch, WriteOptions(false), "status")
}

func (w apiWriter) delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return w.client.Delete(ctx, obj, opts...)
	}
	// A pod through the typed client, which reads nothing of the answer:
	// controller-runtime's Delete decodes the deleted pod and turns it into
	// an unstructured object through JSON, which took 0.5 ms of the
	// operator's CPU per pod deleted (docs/benchmarks.md).
	o := &client.DeleteOptions{}
	o.ApplyOptions(opts)
	return w.pods.Pods(pod.Namespace).Delete(ctx, pod.Name, *o.AsDeleteOptions())
}

func (w apiWriter) event(ps *podsetv1alpha1.PodSet, e podSetEvent) {
	w.recorder.Eventf(ps, nil, e.Type, e.Reason, e.Action, "%s", e.Note)
}
