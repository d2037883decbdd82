package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// waitForStall waits until the PodSet is Stalled for the reason and returns
// the condition's message.
func waitForStall(t *testing.T, ps *podsetv1alpha1.PodSet, reason string) string {
	t.Helper()
	got := waitForStatus(t, ps, stalledFor(reason))
	if c := testenv.Condition(got, podsetv1alpha1.ReadyCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %s while stalled", c.Status)
	}
	return testenv.Condition(got, podsetv1alpha1.StalledCondition).Message
}

func TestTemplateTheAPIServerRefusesStallsWithBackoff(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	// A hostname that is no DNS label: neither the CRD nor the admission
	// policies check it, pod validation refuses it.
	ps := fixture.PodSet(ns, "web").Replicas(5).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Hostname = "Not_A_Label"
	}).Create(t, env.Client)

	msg := waitForStall(t, ps, podsetv1alpha1.PodRejectedReason)
	if !strings.Contains(msg, "Invalid") || !strings.Contains(msg, "hostname") {
		t.Errorf("Stalled message %q does not say what the API server refused", msg)
	}
	eventually(t, "a Warning event", func(context.Context) error {
		for _, e := range warningEvents(t, ps) {
			if strings.HasPrefix(e, podsetv1alpha1.PodRejectedReason+":") {
				return nil
			}
		}
		return fmt.Errorf("no PodRejected warning among %v", warningEvents(t, ps))
	})

	// No hot loop: retries back off exponentially, and each retry sends one
	// pod write (slow start stops at the first refusal), not five.
	before := requests.writes(ns, "pods", "")
	statusBefore := requests.writes(ns, "podsets", "status")
	time.Sleep(3 * time.Second)
	retries := requests.writes(ns, "pods", "") - before
	t.Logf("pod writes in 3s of a stalled PodSet: %d; status writes: %d", retries, requests.writes(ns, "podsets", "status")-statusBefore)
	if retries > 12 {
		t.Errorf("%d pod writes in 3s while stalled; want exponential backoff (at most about log2(3s/5ms) = 10)", retries)
	}
	// Retries ran (each sends a pod write) before the status writes count:
	// a pass that writes no status is one that ran, not one still to come.
	eventually(t, "a retry", func(context.Context) error {
		if requests.writes(ns, "pods", "") == before {
			return fmt.Errorf("no pod write since the stall")
		}
		return nil
	})
	if n := requests.writes(ns, "podsets", "status") - statusBefore; n > 0 {
		t.Errorf("%d status writes while stalled for the same reason; want none", n)
	}
	if len(pods(t, ns)) != 0 {
		t.Errorf("pods exist although every pod is refused")
	}

	// A new template fixes it.
	eventually(t, "fix the template", func(context.Context) error {
		cur := get(t, ps)
		cur.Spec.Template.Spec.Hostname = ""
		return env.Client.Update(t.Context(), cur)
	})
	waitForPods(t, ns, "web-0", "web-1", "web-2", "web-3", "web-4")
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status != metav1.ConditionFalse {
			return fmt.Errorf("still stalled: %+v", c)
		}
		return nil
	})
}

func TestPodSecurityRefusalStalls(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	// NFS volumes are outside the restricted profile's volume types; the
	// operator does not refuse them itself, PodSecurity admission does.
	ps := fixture.PodSet(ns, "web").Replicas(2).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/data"},
		}}}
	}).Create(t, env.Client)
	msg := waitForStall(t, ps, podsetv1alpha1.PodRejectedReason)
	if !strings.Contains(msg, "PodSecurity") || !strings.Contains(msg, "restricted") {
		t.Errorf("Stalled message %q does not name the PodSecurity refusal", msg)
	}
}

func TestHardenedPodsAreAdmittedUnderRestricted(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	// The plain template says nothing about security beyond a user ID.
	ps := fixture.PodSet(ns, "web").Replicas(2).Create(t, env.Client)
	got := waitForPods(t, ns, "web-0", "web-1")
	waitForStatus(t, ps, func(got *podsetv1alpha1.PodSet) error {
		if c := testenv.Condition(got, podsetv1alpha1.StalledCondition); c.Status == metav1.ConditionTrue {
			return fmt.Errorf("stalled: %s", c.Message)
		}
		if got.Status.Replicas != 2 {
			return fmt.Errorf("replicas %d", got.Status.Replicas)
		}
		return nil
	})

	pod := got["web-0"]
	sc, csc := pod.Spec.SecurityContext, pod.Spec.Containers[0].SecurityContext
	switch {
	case sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Errorf("pod runAsNonRoot not true: %+v", sc)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("pod seccompProfile not RuntimeDefault: %+v", sc.SeccompProfile)
	case csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation:
		t.Errorf("container allowPrivilegeEscalation not false: %+v", csc)
	case csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL":
		t.Errorf("container capabilities.drop not [ALL]: %+v", csc.Capabilities)
	case csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem:
		t.Errorf("container readOnlyRootFilesystem not true")
	case pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken:
		t.Errorf("automountServiceAccountToken not false")
	}

	// The operator's field manager owns the hardening fields.
	var owned string
	for _, mf := range pod.ManagedFields {
		if mf.Manager == "podset-operator" && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "" {
			owned = mf.FieldsV1.GetRawString()
		}
	}
	for _, field := range []string{`"f:runAsNonRoot"`, `"f:seccompProfile"`, `"f:allowPrivilegeEscalation"`, `"f:capabilities"`, `"f:readOnlyRootFilesystem"`, `"f:automountServiceAccountToken"`} {
		if !strings.Contains(owned, field) {
			t.Errorf("the operator's field manager does not own %s", field)
		}
	}
}
