package plugin

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// createPod creates the pod ns/name running busybox, controlled by the
// owner (apiVersion, kind, name, uid), or by nothing when kind is "".
func createPod(t *testing.T, ns, name, apiVersion, kind, owner string, uid types.UID) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       template("app:v1").Spec,
	}
	if kind != "" {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, UID: uid, Controller: ptr.To(true)}}
	}
	if err := env.Client.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func TestReplace(t *testing.T) {
	ns := namespace(t)
	ps := createPodSet(t, ns, "argocd-controller", 2, "app:v1")
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	group := podsetv1alpha1.GroupVersion.String()
	web1 := createPod(t, ns, "web-1", group, "PodSet", "web", ps.UID)
	createPod(t, ns, "web-5", group, "PodSet", "web", ps.UID)
	createPod(t, ns, "web-0", group, "PodSet", "web", "an-earlier-uid")
	createPod(t, ns, "api-0", "apps/v1", "ReplicaSet", "api-6d4f", "rs-uid")
	createPod(t, ns, "lone", "", "", "", "")

	cases := []struct {
		args                []string
		wantOut, wantErrOut string
	}{
		{[]string{"web-1"}, "pod/web-1 replacement requested (podset.dev/replace=true): podset web drains it, deletes it within maxUnavailable and makes it again\n", ""},
		{[]string{"web-1"}, "pod/web-1 is already being replaced (podset.dev/replace=true)\n", ""},
		{[]string{"web-1", "--podset", "api"}, "", "error: pod web-1 cannot be replaced: it belongs to podset web, not api\n"},
		{[]string{"web-5"}, "", "error: pod web-5 cannot be replaced: it is not one of podset web's pods (web-0 to web-1); it is deleted as surplus\n"},
		{[]string{"web-0"}, "", "error: pod web-0 cannot be replaced: it is controlled by an earlier podset web (UID an-earlier-uid), which is gone\n"},
		{[]string{"api-0"}, "", "error: pod api-0 cannot be replaced: it is controlled by ReplicaSet api-6d4f, not by a PodSet\n"},
		{[]string{"lone"}, "", "error: pod lone cannot be replaced: no PodSet controls it (it has no controller)\n"},
		{[]string{"nope"}, "", "error: pods \"nope\" not found\n"},
	}
	for _, tc := range cases {
		out, errOut, err := kubectlPodset(t.Context(), t, ns, append([]string{"replace"}, tc.args...)...)
		if out != tc.wantOut || errOut != tc.wantErrOut || (err != nil) != (tc.wantErrOut != "") {
			t.Errorf("replace %s: %v\nstdout %q\nstderr %q\nwant stdout %q, stderr %q", strings.Join(tc.args, " "), err, out, errOut, tc.wantOut, tc.wantErrOut)
		}
	}
	got := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(web1), got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[podsetv1alpha1.ReplaceLabel] != "true" {
		t.Errorf("web-1 labels %v, want %s=true", got.Labels, podsetv1alpha1.ReplaceLabel)
	}
	for _, e := range got.ManagedFields {
		if strings.Contains(e.FieldsV1.GetRawString(), podsetv1alpha1.ReplaceLabel) && (e.Manager != FieldManager || e.Operation != metav1.ManagedFieldsOperationApply) {
			t.Errorf("the label is managed by %s/%s, want %s/Apply", e.Manager, e.Operation, FieldManager)
		}
	}
}
