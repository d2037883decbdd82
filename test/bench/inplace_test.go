package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodsOnImage pins when the in-place rollout is done: the spec alone,
// or a status that still reports the old image, is not enough.
func TestPodsOnImage(t *testing.T) {
	j := job{ns: "ns", sets: []string{"s0"}, n: 2}
	cases := map[string]struct {
		pods []*corev1.Pod
		want bool
	}{
		"both ready, new image in spec and status": {
			pods: []*corev1.Pod{benchPod("s0-0", newImage, newImage, true), benchPod("s0-1", newImage, newImage, true)},
			want: true,
		},
		"status does not list the container yet": {
			pods: []*corev1.Pod{benchPod("s0-0", newImage, "", true), benchPod("s0-1", newImage, newImage, true)},
			want: true,
		},
		"status names the fully qualified image": {
			pods: []*corev1.Pod{benchPod("s0-0", newImage, "docker.io/library/"+newImage, true), benchPod("s0-1", newImage, newImage, true)},
			want: true,
		},
		"spec patched, status still on the old image": {
			pods: []*corev1.Pod{benchPod("s0-0", newImage, baseImage, true), benchPod("s0-1", newImage, newImage, true)},
			want: false,
		},
		"new image, not Ready": {
			pods: []*corev1.Pod{benchPod("s0-0", newImage, newImage, false), benchPod("s0-1", newImage, newImage, true)},
			want: false,
		},
		"old image": {
			pods: []*corev1.Pod{benchPod("s0-0", baseImage, baseImage, true), benchPod("s0-1", newImage, newImage, true)},
			want: false,
		},
		"one pod missing": {
			pods: []*corev1.Pod{benchPod("s0-0", newImage, newImage, true)},
			want: false,
		},
		"an old pod still terminating": {
			pods: []*corev1.Pod{benchPod("s0-0", newImage, newImage, true), benchPod("s0-1", newImage, newImage, true), terminating(benchPod("old", baseImage, baseImage, true))},
			want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := &observer{st: state{pods: map[string]*podState{}}, wake: make(chan struct{})}
			for _, p := range tc.pods {
				o.update(p, false, true)
			}
			if got := podsOnImage(&o.st, j, newImage); got != tc.want {
				t.Errorf("podsOnImage = %v, want %v", got, tc.want)
			}
		})
	}
}

// benchPod is a Running pod of set s0 whose container runs spec and whose
// status reports status ("" for no container status).
func benchPod(name, spec, status string, ready bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{setLabel: "s0"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: spec}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if status != "" {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: status}}
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	return p
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{}
	return p
}

// TestInPlaceWrites pins how an in-place rollout's writes are given to
// clients: the pods/status PATCHes split between the contender's gate
// closes and kwok, and none split when the closes are not known.
func TestInPlaceWrites(t *testing.T) {
	r := requests{
		{Verb: "APPLY", Resource: "pods", Code: "200"}:                        10,
		{Verb: "PATCH", Resource: "pods", Subresource: "status", Code: "200"}: 40,
		{Verb: "APPLY", Resource: "pods", Subresource: "status", Code: "200"}: 10,
		{Verb: "APPLY", Resource: "pods", Code: "200", Seconds: true}:         3,
	}
	m := &measurement{pods: 10, requests: r, gateCloses: 10}
	want := "operator: pods APPLY (the image) 1.00, pods/resize 0.00, pods/status PATCH (gate close) 1.00, pods/status APPLY (gate open) 1.00; kwok (kubelet): pods/status PATCH 3.00"
	if got := inPlaceWrites("podset", m); got != want {
		t.Errorf("podset:\n got %s\nwant %s", got, want)
	}
	m.gateCloses = -1
	want = "kruise-manager: pods APPLY (the image) 1.00, pods/status APPLY (gate open) 1.00; kwok (kubelet): pods/status PATCH (kwok's and the controller's gate, not told apart) 4.00"
	if got := inPlaceWrites("kruise", m); got != want {
		t.Errorf("kruise:\n got %s\nwant %s", got, want)
	}
	dep := &measurement{pods: 2, requests: requests{
		{Verb: "POST", Resource: "pods", Code: "201"}:                         2,
		{Verb: "DELETE", Resource: "pods", Code: "200"}:                       2,
		{Verb: "POST", Resource: "pods", Subresource: "binding", Code: "201"}: 2,
		{Verb: "PATCH", Resource: "pods", Subresource: "status", Code: "200"}: 2,
	}}
	want = "kube-controller-manager (ReplicaSet): pods POST (create) 1.00, pods DELETE 1.00; kwok (kubelet): pods/status PATCH 1.00; scheduler: pods/binding 1.00"
	if got := inPlaceWrites("replicaset", dep); got != want {
		t.Errorf("replicaset:\n got %s\nwant %s", got, want)
	}
}

// TestAPICPURow pins the target on the API server's CPU per in-place pod.
func TestAPICPURow(t *testing.T) {
	m := func(api time.Duration) *measurement {
		return &measurement{pods: 1000, cpu: cpuTimes{api: api, ok: true}}
	}
	if r := apiCPURow("t", m(12*time.Second), m(10*time.Second)); r.result != "met" {
		t.Errorf("1.2: %s %s", r.check, r.result)
	}
	if r := apiCPURow("t", m(13*time.Second), m(10*time.Second)); r.result != "missed" {
		t.Errorf("1.3: %s %s", r.check, r.result)
	}
	if r := apiCPURow("t", m(13*time.Second), &measurement{skipped: true}); r.result != "missed" || !strings.Contains(r.check, "= —") {
		t.Errorf("gated limit not run: %s %s", r.check, r.result)
	}
}
