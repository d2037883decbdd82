package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// askReplace labels a pod podset.dev/replace=true, as kubectl podset
// replace does.
func askReplace(t *testing.T, pod corev1.Pod) {
	t.Helper()
	updatePod(t, pod, func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[podsetv1alpha1.ReplaceLabel] = "true"
	})
}

// waitForNewPod waits until the pod's name is held by a new, live pod.
func waitForNewPod(t *testing.T, old corev1.Pod) corev1.Pod {
	t.Helper()
	var got corev1.Pod
	eventually(t, old.Name+" made again", func(context.Context) error {
		p, ok := pods(t, old.Namespace)[old.Name]
		if !ok || p.UID == old.UID || p.DeletionTimestamp != nil {
			return fmt.Errorf("%s not made again yet", old.Name)
		}
		got = p
		return nil
	})
	return got
}

// TestReplaceOnePod checks podset.dev/replace=true end to end: the pod is
// deleted and made again under its name without the label, within
// maxUnavailable, and asking again changes nothing.
func TestReplaceOnePod(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Replicas(3).MaxUnavailable(1))
	before := pods(t, ns)

	askReplace(t, before["web-1"])
	// Asked again, to the pod being replaced (if it is still there; the
	// uid keeps the label off a new web-1): one replacement all the same.
	again := before["web-1"]
	if err := env.Client.Patch(t.Context(), &again, client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"uid":%q,"labels":{%q:"true"}}}`, again.UID, podsetv1alpha1.ReplaceLabel))); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		t.Fatal(err)
	}
	web1 := waitForNewPod(t, before["web-1"])
	if _, ok := web1.Labels[podsetv1alpha1.ReplaceLabel]; ok {
		t.Errorf("the new web-1 carries %s: it would be replaced again", podsetv1alpha1.ReplaceLabel)
	}
	if image(web1) != image(before["web-1"]) {
		t.Errorf("the new web-1 runs %s, want %s", image(web1), image(before["web-1"]))
	}
	assertUntouched(t, ns, before, "web-0", "web-2")
	markReady(t, web1)
	waitForStatus(t, ps, readyStatus(3))
	if got := pods(t, ns)["web-1"]; got.UID != web1.UID {
		t.Errorf("web-1 was replaced again (UID %s, then %s)", web1.UID, got.UID)
	}

	// The budget: with web-0 unavailable, a Ready web-2 waits.
	now := pods(t, ns)
	markUnready(t, ps, now["web-0"], 2)
	askReplace(t, now["web-2"])
	wait.Consistently(t, "web-2 waits for maxUnavailable", 2*time.Second, func(context.Context) error {
		if p := pods(t, ns)["web-2"]; p.UID != now["web-2"].UID || p.DeletionTimestamp != nil {
			return fmt.Errorf("web-2 was replaced while web-0 was unavailable")
		}
		return nil
	})
	markReady(t, now["web-0"])
	markReady(t, waitForNewPod(t, now["web-2"]))
	waitForStatus(t, ps, readyStatus(3))
	wantEvent(t, ps, podsetv1alpha1.ReplacingRequestedReason, "deleted pods web-2 to make them again", "no event for the replacement")
}

// TestReplaceLabelRefusedOnOtherPods checks the admission policy of
// config/policy/replace.yaml: the label set on a pod no PodSet controls is
// refused, with a message naming what controls it.
func TestReplaceLabelRefusedOnOtherPods(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	for _, tc := range []struct {
		name  string
		owner []metav1.OwnerReference
		want  string
	}{
		{"api-0", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-6d4f", UID: "rs-uid", Controller: ptr.To(true)}},
			"metadata.labels[podset.dev/replace]: pod api-0 is controlled by ReplicaSet api-6d4f: only the pods of a PodSet are replaced this way"},
		{"lone", nil,
			"metadata.labels[podset.dev/replace]: pod lone has no controller: only the pods of a PodSet are replaced this way"},
	} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns, OwnerReferences: tc.owner},
			Spec:       fixture.PodSet(ns, "web").Obj().Spec.Template.Spec,
		}
		if err := env.Client.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		eventually(t, "labelling "+tc.name+" is refused", func(ctx context.Context) error {
			err := env.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, podsetv1alpha1.ReplaceLabel)), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				return fmt.Errorf("labelling %s: %v, want a refusal saying %q", tc.name, err, tc.want)
			}
			return nil
		})
		// Other labels go through.
		if err := env.Client.Patch(t.Context(), pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`))); err != nil {
			t.Errorf("labelling %s team=a: %v", tc.name, err)
		}
	}
}
