package podset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func TestSlimPodKeepsWhatTheOperatorReads(t *testing.T) {
	ps := makePodSet("web").Replicas(3).InitContainer("init", "busybox:1").ServiceName("web-dns").Obj()
	hash := TemplateHash(ps)
	ac, err := PodFromTemplate(ps, PodTemplate(ps), 1, hash)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := Convert(ac, pod); err != nil {
		t.Fatal(err)
	}
	// What the API server and the kubelet add.
	deleting := metav1.Now()
	pod.UID, pod.ResourceVersion, pod.Generation = "uid-1", "42", 1
	pod.DeletionTimestamp = &deleting
	pod.Finalizers = []string{"example.com/hold"}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "podset-operator"}}
	pod.Spec.NodeName = "node-1"
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		PodIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "r", Message: "m", LastTransitionTime: deleting},
			{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue, Reason: "NoUpdateInProgress", Message: "m", LastTransitionTime: deleting},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}},
	}

	got, err := SlimPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: "uid-1", ResourceVersion: "42",
			Labels: pod.Labels, Annotations: pod.Annotations, OwnerReferences: pod.OwnerReferences,
			DeletionTimestamp: &deleting,
		},
		Spec: corev1.PodSpec{
			// The drain hook: how long its sleep holds the container.
			Containers:     []corev1.Container{{Name: "app", Image: pod.Spec.Containers[0].Image, Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}}}},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}},
			NodeName:       "node-1", // spec.lostNodeReplacement
			// spec.serviceName: an apply to the running pod sends them.
			Hostname:  "web-1",
			Subdomain: "web-dns",
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: deleting},
				{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue, Reason: "NoUpdateInProgress", LastTransitionTime: deleting},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slimPod() (-want +got):\n%s", diff)
	}
	if !podReady(got.(*corev1.Pod)) || drifted(ps, &ps.Spec.Template, got.(*corev1.Pod), 1, hash) {
		t.Errorf("the slimmed pod reads differently: ready %v, drifted %v; want ready and not drifted",
			podReady(got.(*corev1.Pod)), drifted(ps, &ps.Spec.Template, got.(*corev1.Pod), 1, hash))
	}

	// A tombstone passes through as it is.
	tombstone := struct{ Key string }{"demo/web-1"}
	if got, err := SlimPod(tombstone); err != nil || got != tombstone {
		t.Errorf("slimPod(tombstone) = %v, %v; want it unchanged", got, err)
	}
}

// TestSlimPodKeepsRestartCountsWhileUpdating: an in-place update finishes
// by the restart counts the kubelet reports (restarted), so the cache
// must keep them while the pod's gate is closed.
func TestSlimPodKeepsRestartCountsWhileUpdating(t *testing.T) {
	pod := makePod("web-0").hash("new").ready().obj()
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: podsetv1alpha1.InPlaceUpdateReadyCondition}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "localhost/app:v2"}}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionFalse})
	rec, err := NewRestartRecord(&pod, "new", []string{"app"})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations = map[string]string{RestartRecordAnnotation: rec}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "app", Image: "localhost/app:stable", RestartCount: 1,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}
	slim, err := SlimPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !restarted(&pod) || !restarted(slim.(*corev1.Pod)) {
		t.Errorf("restarted() = %v for the pod, %v for the cached pod; want true for both", restarted(&pod), restarted(slim.(*corev1.Pod)))
	}
}
