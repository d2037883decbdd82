package podset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// BenchmarkPassOverAnInPlaceRollout is the CPU of one pass's planning and
// status over 1000 pods in the middle of an in-place image rollout (half
// of them updated, the rest waiting with their gate closed), as passes
// repeat while kwok or the kubelets report each pod's progress.
func BenchmarkPassOverAnInPlaceRollout(b *testing.B) {
	ps := makePodSet("web").Replicas(1000).Obj()
	old := ps.Spec.Template.DeepCopy()
	old.Spec.Containers[0].Image = "busybox:1.35"
	hash := TemplateHash(ps)
	pods := make([]corev1.Pod, 1000)
	for i := range pods {
		h, tmpl := hash, &ps.Spec.Template
		if i%2 == 0 {
			h, tmpl = "old", old
		}
		ac, err := PodFromTemplate(ps, tmpl, i, h)
		if err != nil {
			b.Fatal(err)
		}
		if err := Convert(ac, &pods[i]); err != nil {
			b.Fatal(err)
		}
		gate := corev1.ConditionTrue
		if i%2 == 0 {
			gate = corev1.ConditionFalse
		}
		pods[i].Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: gate},
		}}
		slim, _ := SlimPod(&pods[i])
		pods[i] = *slim.(*corev1.Pod)
	}
	in := testInput(ps, noneInFlight)
	in.Revs.Templates["old"] = old
	now := metav1.NewTime(time.Now())
	b.ReportAllocs()
	for b.Loop() {
		plan := NewView(ps, in.Revs, pods, in.Now).Plan(in.Input)
		NewView(ps, in.Revs, pods, now.Time).Status(&plan, &Outcome{ReplacedLost: plan.ReplaceLost})
	}
}
