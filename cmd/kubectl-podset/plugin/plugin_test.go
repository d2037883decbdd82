package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// kubectlPodset runs the plugin with args against the test API server and
// returns what it printed and its error (non-nil: a non-zero exit).
func kubectlPodset(ctx context.Context, t *testing.T, ns string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		func() (client.WithWatch, error) {
			return client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		})
	cmd.SetArgs(append([]string{"--namespace", ns}, args...))
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// running is a kubectl podset command running in the background.
type running struct {
	out, errOut syncBuffer
	done        chan error
}

// startKubectlPodset runs kubectl podset in the background.
func startKubectlPodset(t *testing.T, ns string, args ...string) *running {
	t.Helper()
	r := &running{done: make(chan error, 1)}
	cmd := newCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &r.out, ErrOut: &r.errOut},
		func() (client.WithWatch, error) {
			return client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		})
	cmd.SetArgs(append([]string{"--namespace", ns}, args...))
	go func() { r.done <- cmd.ExecuteContext(t.Context()) }()
	return r
}

// waitFor waits until the command has printed text: what it printed
// before the test changes what it waits on. Watches start from the
// resource version the command read, so no change after that is lost.
func (r *running) waitFor(t *testing.T, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the command did not print %q; it printed:\n%s\nstderr:\n%s", text, r.out.String(), r.errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits for the command to end.
func (r *running) wait() (stdout, stderr string, err error) {
	err = <-r.done
	return r.out.String(), r.errOut.String(), err
}

// syncBuffer is a bytes.Buffer a test reads while the command writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// template is a pod template the admission policies accept, with image.
func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "web"}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)},
			Containers:      []corev1.Container{{Name: "app", Image: image, Command: []string{"sleep", "infinity"}}},
		},
	}
}

// createPodSet creates a PodSet named web with replicas pods of image,
// applied by manager (server-side apply, as Argo CD and Flux write).
func createPodSet(t *testing.T, ns, manager string, replicas int32, image string) *podsetv1alpha1.PodSet {
	t.Helper()
	ps := fixture.PodSet(ns, "web").Replicas(replicas).Template(template(image)).Obj()
	ps.TypeMeta = metav1.TypeMeta{APIVersion: podsetv1alpha1.GroupVersion.String(), Kind: "PodSet"}
	body, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(t.Context(), ps, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(manager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	return ps
}

// setStatus writes the PodSet's status as the operator would, for the
// current generation.
func setStatus(t *testing.T, ps *podsetv1alpha1.PodSet, change func(*podsetv1alpha1.PodSetStatus)) {
	t.Helper()
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	ps.Status.ObservedGeneration = ps.Generation
	change(&ps.Status)
	for i := range ps.Status.Conditions {
		if ps.Status.Conditions[i].LastTransitionTime.IsZero() {
			ps.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if err := env.Client.Status().Update(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
}

func complete(replicas int32, rev string) func(*podsetv1alpha1.PodSetStatus) {
	return func(s *podsetv1alpha1.PodSetStatus) {
		s.Replicas, s.ReadyReplicas, s.AvailableReplicas, s.UpdatedReplicas = replicas, replicas, replicas, replicas
		s.CurrentRevision, s.UpdateRevision = rev, rev
		s.Conditions = []metav1.Condition{
			{Type: podsetv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", Message: "all pods are available"},
			{Type: podsetv1alpha1.StalledCondition, Status: metav1.ConditionFalse, Reason: "Progressing", Message: "progressing"},
		}
	}
}

func stalled(s *podsetv1alpha1.PodSetStatus) {
	s.Replicas, s.ReadyReplicas, s.AvailableReplicas, s.UpdatedReplicas = 4, 3, 3, 1
	s.CurrentRevision, s.UpdateRevision = "web-old", "web-new"
	s.Conditions = []metav1.Condition{
		{Type: podsetv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: "RollingOut", Message: "1 of 4 pods updated"},
		{Type: podsetv1alpha1.StalledCondition, Status: metav1.ConditionTrue, Reason: podsetv1alpha1.ProgressDeadlineExceededReason,
			Message: "no progress for 600s: web-3 is not ready: ImagePullBackOff"},
	}
}

func TestStatusMessage(t *testing.T) {
	partitioned := func(p int32) *podsetv1alpha1.PodSet {
		ps := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2}}
		ps.Spec.Replicas = ptr.To[int32](4)
		ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{Partition: ptr.To(p)}
		ps.Status = podsetv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4,
			CurrentRevision: "web-a", UpdateRevision: "web-b"}
		return ps
	}
	cases := map[string]struct {
		ps       *podsetv1alpha1.PodSet
		updated  int32
		wantMsg  string
		wantDone bool
	}{
		"spec not observed yet": {ps: func() *podsetv1alpha1.PodSet { ps := partitioned(0); ps.Generation = 3; return ps }(),
			wantMsg: "Waiting for podset spec update to be observed...\n"},
		"rolling":               {ps: partitioned(0), updated: 2, wantMsg: "waiting for podset rolling update to complete 2 pods at revision web-b...\n"},
		"partition in progress": {ps: partitioned(2), updated: 1, wantMsg: "Waiting for partitioned roll out to finish: 1 out of 2 new pods have been updated...\n"},
		"partitioned, done":     {ps: partitioned(2), updated: 2, wantMsg: "partitioned roll out complete: 2 new pods have been updated...\n", wantDone: true},
		"complete":              {ps: func() *podsetv1alpha1.PodSet { ps := partitioned(0); ps.Status.CurrentRevision = "web-b"; return ps }(), updated: 4, wantMsg: "roll out complete: 4 pods at revision web-b...\n", wantDone: true},
		"pods not ready":        {ps: func() *podsetv1alpha1.PodSet { ps := partitioned(0); ps.Status.ReadyReplicas = 2; return ps }(), wantMsg: "Waiting for 2 pods to be ready...\n"},
		"paused with changes pending": {ps: func() *podsetv1alpha1.PodSet {
			ps := partitioned(0)
			ps.Spec.Paused = true
			ps.Status.Conditions = []metav1.Condition{{Type: podsetv1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: podsetv1alpha1.PausedReason}}
			return ps
		}(), updated: 1, wantMsg: "Waiting for the rollout to be resumed: podset \"web\" is paused with 1 of 4 pods updated...\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.ps.Status.UpdatedReplicas = tc.updated
			msg, done, err := statusMessage(tc.ps)
			if err != nil || msg != tc.wantMsg || done != tc.wantDone {
				t.Errorf("statusMessage = %q, %v, %v; want %q, %v, nil", msg, done, err, tc.wantMsg, tc.wantDone)
			}
		})
	}
}

func TestRolloutStatus(t *testing.T) {
	ns := namespace(t)
	ps := createPodSet(t, ns, "argocd-controller", 4, "app:v1")

	// Complete.
	setStatus(t, ps, complete(4, "web-5c9d"))
	out, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "status", "web")
	if err != nil || out != "roll out complete: 4 pods at revision web-5c9d...\n" {
		t.Fatalf("complete: %q, %v", out, err)
	}

	// Stalled: a non-zero exit quoting the condition.
	setStatus(t, ps, stalled)
	_, errOut, err := kubectlPodset(t.Context(), t, ns, "rollout", "status", "web")
	if err == nil || !strings.Contains(errOut, "ProgressDeadlineExceeded") || !strings.Contains(errOut, "web-3 is not ready: ImagePullBackOff") {
		t.Fatalf("stalled: err %v, stderr %q", err, errOut)
	}

	// In progress, once (--watch=false): exit 0, no wait.
	setStatus(t, ps, func(s *podsetv1alpha1.PodSetStatus) {
		stalled(s)
		s.Conditions = s.Conditions[:1]
	})
	out, _, err = kubectlPodset(t.Context(), t, ns, "rollout", "status", "web", "--watch=false")
	if err != nil || out != "Waiting for 1 pods to be ready...\n" {
		t.Fatalf("--watch=false: %q, %v", out, err)
	}

	// A timeout: non-zero.
	_, errOut, err = kubectlPodset(t.Context(), t, ns, "rollout", "status", "web", "--timeout=300ms")
	if err == nil || !strings.Contains(errOut, "timed out") {
		t.Fatalf("timeout: err %v, stderr %q", err, errOut)
	}

	// Watching: the rollout makes progress, then completes.
	cmd := startKubectlPodset(t, ns, "rollout", "status", "web", "--timeout=30s")
	cmd.waitFor(t, "Waiting for 1 pods to be ready...\n")
	setStatus(t, ps, func(s *podsetv1alpha1.PodSetStatus) {
		complete(4, "web-new")(s)
		s.UpdatedReplicas = 3
		s.CurrentRevision = "web-old"
	})
	cmd.waitFor(t, "3 pods at revision web-new...\n")
	setStatus(t, ps, complete(4, "web-new"))
	out, _, err = cmd.wait()
	want := "Waiting for 1 pods to be ready...\n" +
		"waiting for podset rolling update to complete 3 pods at revision web-new...\n" +
		"roll out complete: 4 pods at revision web-new...\n"
	if err != nil || out != want {
		t.Fatalf("watch: %v\ngot:\n%s\nwant:\n%s", err, out, want)
	}
}

// TestRolloutStatusThroughAStall watches a rollout that stalls (exit
// non-zero, as kubectl does on ProgressDeadlineExceeded), and a second
// status that watches its recovery to completion.
func TestRolloutStatusThroughAStall(t *testing.T) {
	ns := namespace(t)
	ps := createPodSet(t, ns, "kustomize-controller", 4, "app:v2")
	setStatus(t, ps, func(s *podsetv1alpha1.PodSetStatus) { stalled(s); s.Conditions = s.Conditions[:1] })

	cmd := startKubectlPodset(t, ns, "rollout", "status", "web", "--timeout=30s")
	cmd.waitFor(t, "Waiting for 1 pods to be ready...\n")
	setStatus(t, ps, stalled)
	if _, errOut, err := cmd.wait(); err == nil || !strings.Contains(errOut, `podset "web" rollout stalled (ProgressDeadlineExceeded): no progress for 600s`) {
		t.Fatalf("stall: err %v, stderr %q", err, errOut)
	}

	// The template is fixed: the stall clears (the operator turns the
	// PodSet back to Reconciling), and the rollout completes.
	setStatus(t, ps, func(s *podsetv1alpha1.PodSetStatus) { stalled(s); s.Conditions = s.Conditions[:1] })
	cmd = startKubectlPodset(t, ns, "rollout", "status", "web", "--timeout=30s")
	cmd.waitFor(t, "Waiting for 1 pods to be ready...\n")
	setStatus(t, ps, func(s *podsetv1alpha1.PodSetStatus) {
		stalled(s)
		s.Conditions = s.Conditions[:1]
		s.ReadyReplicas, s.AvailableReplicas, s.UpdatedReplicas = 4, 4, 2
	})
	cmd.waitFor(t, "2 pods at revision web-new...\n")
	setStatus(t, ps, complete(4, "web-new"))
	out, errOut, err := cmd.wait()
	if err != nil || out != ("Waiting for 1 pods to be ready...\n"+"waiting for podset rolling update to complete 2 pods at revision web-new...\n"+
		"roll out complete: 4 pods at revision web-new...\n") {
		t.Fatalf("recovery: %v\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// createRevision writes a ControllerRevision the way the operator does.
// TestUndoRestoresTheServiceName: a revision's template holds the
// subdomain its pods were made with (spec.serviceName), so a rollback to
// it writes that serviceName back, and a template without one.
func TestUndoRestoresTheServiceName(t *testing.T) {
	ns := namespace(t)
	ps := createPodSet(t, ns, "kubectl", 1, "app:v2")
	old := template("app:v1")
	old.Spec.Subdomain = "web-dns"
	createRevision(t, ps, "aaa1", 1, old)

	if out, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "undo", "web", "--to-revision=1"); err != nil || !strings.Contains(out, "rolled back to revision 1") {
		t.Fatalf("undo: %v\n%s", err, out)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	if ps.Spec.ServiceName != "web-dns" || ps.Spec.Template.Spec.Subdomain != "" || ps.Spec.Template.Spec.Containers[0].Image != "app:v1" {
		t.Errorf("after undo: serviceName %q, template subdomain %q, image %s; want web-dns, none, app:v1",
			ps.Spec.ServiceName, ps.Spec.Template.Spec.Subdomain, ps.Spec.Template.Spec.Containers[0].Image)
	}
	if out, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "undo", "web", "--to-revision=1"); err != nil || !strings.Contains(out, "skipped rollback") {
		t.Errorf("undo to the revision it now runs: %v\n%s", err, out)
	}
}

func createRevision(t *testing.T, ps *podsetv1alpha1.PodSet, hash string, number int64, tpl corev1.PodTemplateSpec) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tpl}})
	if err != nil {
		t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: ps.Name + "-" + hash, Namespace: ps.Namespace,
			Labels: map[string]string{podsetv1alpha1.NameLabel: ps.Name, podsetv1alpha1.TemplateHashLabel: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: podsetv1alpha1.GroupVersion.String(), Kind: "PodSet",
				Name: ps.Name, UID: ps.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}
	if err := env.Client.Create(t.Context(), cr); err != nil {
		t.Fatal(err)
	}
}

func TestHistoryAndUndo(t *testing.T) {
	ns := namespace(t)
	ps := createPodSet(t, ns, "argocd-controller", 2, "app:v3")
	v1, v2, v3 := template("app:v1"), template("app:v2"), template("app:v3")
	v2.Annotations = map[string]string{ChangeCauseAnnotation: "bump to v2"}
	v3.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ONLY_IN_V3", Value: "1"}}
	createRevision(t, ps, "aaa1", 1, v1)
	createRevision(t, ps, "bbb2", 2, v2)
	createRevision(t, ps, "ccc3", 3, v3)
	setStatus(t, ps, complete(2, "web-ccc3"))

	out, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "history", "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REVISION", "web-aaa1", "bump to v2", "app:v2", "web-ccc3 (current)"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	out, _, err = kubectlPodset(t.Context(), t, ns, "rollout", "history", "web", "--revision=2")
	if err != nil || !strings.Contains(out, "image: app:v2") || !strings.Contains(out, "bump to v2") {
		t.Errorf("history --revision=2: %v\n%s", err, out)
	}

	// Undo to the previous revision while Argo CD owns the template.
	out, errOut, err := kubectlPodset(t.Context(), t, ns, "rollout", "undo", "web")
	if err != nil || !strings.Contains(out, "rolled back to revision 2 (web-bbb2)") || !strings.Contains(out, FieldManager) {
		t.Fatalf("undo: %v\n%s", err, out)
	}
	if !strings.Contains(errOut, "Warning: spec.template is also managed by argocd-controller") {
		t.Errorf("undo gave no warning about argocd-controller: %q", errOut)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	c := ps.Spec.Template.Spec.Containers[0]
	if c.Image != "app:v2" || len(c.Env) != 0 {
		t.Errorf("after undo the container is %+v, want v2's exactly (no env from v3)", c)
	}
	if got := fieldManagersOf(ps, `"f:template"`); !strings.Contains(got, FieldManager) {
		t.Errorf("managedFields owning spec.template: %s, want %s among them", got, FieldManager)
	}

	// Undo to an explicit revision; undo to the current one is skipped.
	if out, _, err = kubectlPodset(t.Context(), t, ns, "rollout", "undo", "web", "--to-revision=1"); err != nil || !strings.Contains(out, "rolled back to revision 1") {
		t.Fatalf("undo --to-revision=1: %v\n%s", err, out)
	}
	if out, _, err = kubectlPodset(t.Context(), t, ns, "rollout", "undo", "web", "--to-revision=1"); err != nil || !strings.Contains(out, "skipped rollback") {
		t.Fatalf("undo to the current template: %v\n%s", err, out)
	}
	if _, _, err = kubectlPodset(t.Context(), t, ns, "rollout", "undo", "web", "--to-revision=9"); err == nil {
		t.Fatal("undo to a missing revision succeeded")
	}
}

func TestRestart(t *testing.T) {
	ns := namespace(t)
	ps := createPodSet(t, ns, "argocd-controller", 2, "app:v1")
	before := time.Now().Add(-time.Second)
	out, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "restart", "web")
	if err != nil || !strings.Contains(out, "podset.podset.dev/web restarted") {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339, ps.Spec.Template.Annotations[RestartedAtAnnotation])
	if err != nil || at.Before(before.Truncate(time.Second)) {
		t.Fatalf("template annotation %s = %q (%v)", RestartedAtAnnotation, ps.Spec.Template.Annotations[RestartedAtAnnotation], err)
	}
	if ps.Spec.Template.Spec.Containers[0].Image != "app:v1" || ps.Spec.Template.Labels["tier"] != "web" {
		t.Errorf("restart changed more than the annotation: %+v", ps.Spec.Template)
	}
	// The plugin owns only that annotation; Argo CD keeps the rest.
	if err := createPodSetErr(t, ns); err != nil {
		t.Errorf("Argo CD's next apply conflicts after a restart: %v", err)
	}
	if _, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "restart", "nope"); err == nil {
		t.Error("restart of a missing PodSet succeeded (it would have created one)")
	}
}

// createPodSetErr re-applies the web PodSet as argocd-controller without
// forcing, as a sync does.
func createPodSetErr(t *testing.T, ns string) error {
	ps := &podsetv1alpha1.PodSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: podsetv1alpha1.GroupVersion.String(), Kind: "PodSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       podsetv1alpha1.PodSetSpec{Replicas: ptr.To[int32](2), Template: template("app:v1")},
	}
	body, _ := json.Marshal(ps)
	return env.Client.Patch(t.Context(), ps, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("argocd-controller"))
}

func TestPauseAndResume(t *testing.T) {
	ns := namespace(t)
	// Argo CD's manifest leaves spec.paused out.
	ps := createPodSet(t, ns, "argocd-controller", 2, "app:v1")
	pausedNow := func() bool {
		t.Helper()
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
			t.Fatal(err)
		}
		return ps.Spec.Paused
	}
	for _, step := range []struct {
		verb, wantOut string
		wantPaused    bool
	}{
		{"pause", "podset.podset.dev/web paused\n", true},
		{"pause", "podset.podset.dev/web already paused\n", true},
		{"resume", "podset.podset.dev/web resumed\n", false},
		{"resume", "podset.podset.dev/web already resumed\n", false},
		{"pause", "podset.podset.dev/web paused\n", true},
	} {
		out, errOut, err := kubectlPodset(t.Context(), t, ns, "rollout", step.verb, "web")
		if err != nil || out != step.wantOut {
			t.Fatalf("rollout %s: %v, stdout %q, stderr %q; want %q", step.verb, err, out, errOut, step.wantOut)
		}
		if got := pausedNow(); got != step.wantPaused {
			t.Fatalf("after rollout %s: spec.paused %v, want %v", step.verb, got, step.wantPaused)
		}
	}
	if got := fieldManagersOf(ps, `"f:paused"`); got != FieldManager+"/Apply" {
		t.Errorf("spec.paused managed by %q, want only %s/Apply", got, FieldManager)
	}
	// Argo CD's next sync neither conflicts nor resumes: its manifest does
	// not own spec.paused.
	if err := createPodSetErr(t, ns); err != nil {
		t.Errorf("Argo CD's next apply conflicts after a pause: %v", err)
	}
	if !pausedNow() {
		t.Error("Argo CD's next apply resumed the PodSet")
	}
	// A manifest that sets spec.paused owns it: a sync (Flux forces its
	// applies) puts Git's value back.
	gitops := &podsetv1alpha1.PodSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: podsetv1alpha1.GroupVersion.String(), Kind: "PodSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       podsetv1alpha1.PodSetSpec{Replicas: ptr.To[int32](2), Template: template("app:v1")},
	}
	body, err := json.Marshal(gitops)
	if err != nil {
		t.Fatal(err)
	}
	body = []byte(strings.Replace(string(body), `"spec":{`, `"spec":{"paused":false,`, 1))
	if err := env.Client.Patch(t.Context(), gitops, client.RawPatch(types.ApplyPatchType, body), client.FieldOwner("kustomize-controller"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if pausedNow() {
		t.Error("a forced apply of paused: false left the PodSet paused")
	}

	if _, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "pause", "nope"); err == nil {
		t.Error("pause of a missing PodSet succeeded (it would have created one)")
	}
}

// fieldManagersOf lists the managers, with their operation, whose fields
// include field.
func fieldManagersOf(ps *podsetv1alpha1.PodSet, field string) string {
	var out []string
	for _, e := range ps.ManagedFields {
		if strings.Contains(e.FieldsV1.GetRawString(), field) {
			out = append(out, e.Manager+"/"+string(e.Operation))
		}
	}
	return strings.Join(out, ",")
}
