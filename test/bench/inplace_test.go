package main

import (
	"testing"

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
