package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestOrdinalsStartNamesAndMovesPods checks spec.ordinals.start: pods are
// named from it, and moving it moves the set as a StatefulSet with
// podManagementPolicy Parallel does: the pods left outside the new range
// are deleted, the missing ones created, the ones in both ranges kept, and
// the status lists the new pods once they are ready.
func TestOrdinalsStartNamesAndMovesPods(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Replicas(3).OrdinalsStart(3))
	before := pods(t, ns)
	if got := before["web-3"].Labels[podsetv1alpha1.OrdinalLabel]; got != "3" {
		t.Errorf("web-3 ordinal label %q, want 3", got)
	}
	if diff := cmp.Diff([]string{"web-3", "web-4", "web-5"}, ps.Status.PodNames); diff != "" {
		t.Errorf("podNames (-want +got):\n%s", diff)
	}

	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Ordinals.Start = 5 })
	moved := waitForPods(t, ns, "web-5", "web-6", "web-7")
	if moved["web-5"].UID != before["web-5"].UID {
		t.Errorf("web-5 was recreated; it is in both ranges and must be kept")
	}
	markAllReady(t, ns)
	got := waitForStatus(t, ps, healthy(3, 3))
	if diff := cmp.Diff([]string{"web-5", "web-6", "web-7"}, got.Status.PodNames); diff != "" {
		t.Errorf("podNames (-want +got):\n%s", diff)
	}
	if got.Status.CurrentRevision != got.Status.UpdateRevision {
		t.Errorf("currentRevision %q, updateRevision %q: want equal", got.Status.CurrentRevision, got.Status.UpdateRevision)
	}

	// Back to 0, and scaled through the scale subresource meanwhile.
	updatePodSet(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Ordinals = nil })
	scale(t, ps, 2)
	waitForPods(t, ns, "web-0", "web-1")
	markAllReady(t, ns)
	got = waitForStatus(t, ps, healthy(2, 2))
	if diff := cmp.Diff([]string{"web-0", "web-1"}, got.Status.PodNames); diff != "" {
		t.Errorf("podNames (-want +got):\n%s", diff)
	}
}

// TestPartitionCountsFromOrdinalsStart checks that the partition counts
// pods from spec.ordinals.start, as a StatefulSet's does: with start 10
// and partition 2, web-10 and web-11 keep their revision and web-12 and
// web-13 take the new template.
func TestPartitionCountsFromOrdinalsStart(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := createReady(t, fixture.PodSet(ns, "web").Recreate().Replicas(4).OrdinalsStart(10).MaxUnavailable(1).Partition(2))
	before := pods(t, ns)

	setImage(t, ps, "busybox:1.37")
	markReady(t, waitForImage(t, ns, "web-13", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-12", "busybox:1.37"))
	got := waitForStatus(t, ps, healthy(4, 2))
	assertUntouched(t, ns, before, "web-10", "web-11")
	if msg := testenv.Condition(got, podsetv1alpha1.ReadyCondition).Message; !strings.Contains(msg, "partition 2 holds back ordinals 10 to 11") {
		t.Errorf("Ready message %q does not say the partition holds back ordinals 10 to 11", msg)
	}
	if got.Status.CurrentRevision == got.Status.UpdateRevision {
		t.Errorf("currentRevision %q equals updateRevision: web-10 and web-11 run the older one", got.Status.CurrentRevision)
	}

	// A held-back pod that is deleted comes back on the revision it ran.
	now := pods(t, ns)
	forceDelete(t, now["web-10"])
	web10 := waitForReplacement(t, ns, now, "web-10")["web-10"]
	if image(web10) != "busybox:1.36" {
		t.Errorf("web-10 recreated with image %s, want the held-back busybox:1.36", image(web10))
	}
	markReady(t, web10)
	waitForStatus(t, ps, healthy(4, 2))

	// Partition 0 finishes the rollout.
	setPartition(t, ps, 0)
	markReady(t, waitForImage(t, ns, "web-11", "busybox:1.37"))
	markReady(t, waitForImage(t, ns, "web-10", "busybox:1.37"))
	waitForStatus(t, ps, healthy(4, 4))
}

// TestOrdinalsStartAdmission checks the bounds the API server enforces on
// spec.ordinals.start, so that every pod name stays a DNS label of at most
// 63 characters: start is not negative, and start+replicas is at most
// MaxReplicas, also when replicas changes through the scale subresource.
func TestOrdinalsStartAdmission(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	refused := map[string]struct {
		start, replicas int32
	}{
		"negative start":                 {start: -1, replicas: 1},
		"start past the highest ordinal": {start: podsetv1alpha1.MaxReplicas, replicas: 0},
		"start+replicas past the limit":  {start: podsetv1alpha1.MaxReplicas - 2, replicas: 3},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			ps := fixture.PodSet(ns, "refused").Replicas(tc.replicas).OrdinalsStart(tc.start).Obj()
			err := env.Client.Create(t.Context(), ps)
			if err == nil {
				t.Fatalf("start %d, replicas %d accepted; want a refusal", tc.start, tc.replicas)
			}
			if !strings.Contains(err.Error(), "spec.ordinals.start") {
				t.Errorf("refusal does not name spec.ordinals.start: %v", err)
			}
		})
	}

	// The longest name at the highest ordinal is accepted, and its pods
	// are valid: web...-9999 is a 63-character DNS label.
	long := strings.Repeat("a", podsetv1alpha1.MaxNameLength)
	ps := fixture.PodSet(ns, long).Replicas(2).OrdinalsStart(podsetv1alpha1.MaxReplicas-2).Create(t, env.Client)
	names := []string{long + "-9998", long + "-9999"}
	eventually(t, "pods "+strings.Join(names, ", "), func(ctx context.Context) error {
		for _, n := range names {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &corev1.Pod{}); err != nil {
				return err
			}
		}
		return nil
	})
	// Scaling past the highest ordinal is refused, through the scale
	// subresource (kubectl scale, an HPA) too.
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`))
	target := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: ps.Name, Namespace: ns}}
	if err := env.Client.SubResource("scale").Patch(t.Context(), target, patch); err == nil || !strings.Contains(err.Error(), "spec.ordinals.start") {
		t.Errorf("scale to 3 at start 9998: %v; want a refusal naming spec.ordinals.start", err)
	}
	if got := get(t, ps); ptr.Deref(got.Spec.Replicas, 0) != 2 {
		t.Errorf("replicas %d after the refused scale, want 2", ptr.Deref(got.Spec.Replicas, 0))
	}
}
