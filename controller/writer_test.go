package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// recordingWriter is the writer of the tests that need no control plane:
// it records each write as one line a test compares whole, answers each
// with the object written (a pod created gets the UID "uid-<name>"), and
// fails the writes named in fail with their error.
//
// The lines:
//
//	APPLY pods/web-0 create-only          an apply that can only create
//	APPLY pods/web-0 uid=u0               an apply to that pod only
//	APPLY pods/web-0/resize uid=u0
//	PATCH pods/web-0/status uid=u0 podset.dev/InPlaceUpdateReady=True Ready=False
//	DELETE pods/web-0 uid=u0 [grace=0]
//	POST controllerrevisions/web-abc
//	PATCH controllerrevisions/web-abc {"metadata":{"resourceVersion":"7"},"revision":3}
//	APPLY podsets/web/status, APPLY poddisruptionbudgets/web, ...
type recordingWriter struct {
	// fail holds the error of a write, by its line's first two words
	// ("APPLY pods/web-0").
	fail map[string]error

	mu     sync.Mutex
	writes []string
	events []podSetEvent
	rv     int
}

var _ writer = (*recordingWriter)(nil)

// sent is the writes so far, sorted: the writes of a pass go out in
// parallel, so only their set is stable.
func (w *recordingWriter) sent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(slices.Values(w.writes))
}

// record notes a write and returns its error and the next
// resourceVersion.
func (w *recordingWriter) record(line string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, line)
	fields := strings.Fields(line)
	if err := w.fail[strings.Join(fields[:min(2, len(fields))], " ")]; err != nil {
		return "", err
	}
	w.rv++
	return fmt.Sprint(100 + w.rv), nil
}

func (w *recordingWriter) applyPod(_ context.Context, ac *corev1ac.PodApplyConfiguration, subresource string) (*corev1.Pod, error) {
	name := ptr.Deref(ac.Name, "")
	target := "pods/" + name
	if subresource != "" {
		target += "/" + subresource
	}
	line := "APPLY " + target
	uid := ptr.Deref(ac.UID, "")
	switch {
	case uid != "":
		line += " uid=" + string(uid)
	case ptr.Deref(ac.ResourceVersion, "") == createOnly:
		line += " create-only"
		uid = types.UID("uid-" + name)
	}
	rv, err := w.record(line)
	if err != nil {
		return nil, err
	}
	// The pod written: what the apply set of it, with its UID and new
	// resourceVersion.
	pod := &corev1.Pod{}
	if err := podset.Convert(ac, pod); err != nil {
		return nil, err
	}
	pod.UID, pod.ResourceVersion = uid, rv
	return pod, nil
}

func (w *recordingWriter) apply(_ context.Context, ac runtime.ApplyConfiguration, subresource string) (string, error) {
	var obj struct {
		Kind     string            `json:"kind"`
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	data, err := json.Marshal(ac)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return "", err
	}
	target := strings.ToLower(obj.Kind) + "s/" + obj.Metadata.Name
	if subresource != "" {
		target += "/" + subresource
	}
	return w.record("APPLY " + target)
}

func (w *recordingWriter) create(_ context.Context, obj client.Object) error {
	if _, ok := obj.(*appsv1.ControllerRevision); !ok {
		return fmt.Errorf("recordingWriter: create of a %T", obj)
	}
	_, err := w.record("POST controllerrevisions/" + obj.GetName())
	return err
}

func (w *recordingWriter) patch(_ context.Context, obj client.Object, p client.Patch) error {
	if _, ok := obj.(*appsv1.ControllerRevision); !ok {
		return fmt.Errorf("recordingWriter: patch of a %T", obj)
	}
	data, err := p.Data(obj)
	if err != nil {
		return err
	}
	_, err = w.record(fmt.Sprintf("PATCH controllerrevisions/%s %s", obj.GetName(), data))
	return err
}

func (w *recordingWriter) patchPodStatus(_ context.Context, namespace, name string, patch []byte) (*corev1.Pod, error) {
	var body struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
		Status struct {
			Conditions []corev1.PodCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(patch, &body); err != nil {
		return nil, err
	}
	line := fmt.Sprintf("PATCH pods/%s/status uid=%s", name, body.Metadata.UID)
	for _, c := range body.Status.Conditions {
		line += fmt.Sprintf(" %s=%s", c.Type, c.Status)
	}
	rv, err := w.record(line)
	if err != nil {
		return nil, err
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: body.Metadata.UID, ResourceVersion: rv}}, nil
}

func (w *recordingWriter) delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := (&client.DeleteOptions{}).ApplyOptions(opts)
	var kind string
	switch obj.(type) {
	case *corev1.Pod:
		kind = "pods"
	case *appsv1.ControllerRevision:
		kind = "controllerrevisions"
	case *policyv1.PodDisruptionBudget:
		kind = "poddisruptionbudgets"
	default:
		return fmt.Errorf("recordingWriter: delete of a %T", obj)
	}
	line := fmt.Sprintf("DELETE %s/%s", kind, obj.GetName())
	if o.Preconditions != nil && o.Preconditions.UID != nil {
		line += " uid=" + string(*o.Preconditions.UID)
	}
	if o.GracePeriodSeconds != nil {
		line += fmt.Sprintf(" grace=%d", *o.GracePeriodSeconds)
	}
	_, err := w.record(line)
	return err
}

func (w *recordingWriter) event(_ *podsetv1alpha1.PodSet, e podSetEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
}

// podsReader is the API server as createPods reads it, to find out who
// holds a pod name a create found taken: the pods given, by name.
type podsReader map[string]*corev1.Pod

func (r podsReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	pod, ok := r[key.Name]
	if !ok {
		return notFound(key.Name)
	}
	pod.DeepCopyInto(obj.(*corev1.Pod))
	return nil
}

func (r podsReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("podsReader does not list")
}
