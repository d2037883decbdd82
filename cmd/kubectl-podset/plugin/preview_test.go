package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// manifest writes the PodSet web with spec as a YAML-or-JSON file, as a
// user keeps it in Git (no namespace: -n names it), and returns its path.
func manifest(t *testing.T, spec podsetv1alpha1.PodSetSpec) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"apiVersion": podsetv1alpha1.GroupVersion.String(), "kind": "PodSet",
		"metadata": map[string]any{"name": "web"}, "spec": spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runningPodSet creates the PodSet web with spec, its ControllerRevision
// and its pods as the operator makes them (PodFromTemplate, applied by its
// field manager), Running and Ready for an hour, their readiness gate
// open, except the ordinals in unready, whose Ready is False.
func runningPodSet(t *testing.T, ns string, spec podsetv1alpha1.PodSetSpec, unready ...int) *podsetv1alpha1.PodSet {
	t.Helper()
	ps := &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: spec}
	if err := env.Client.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	hash := podset.TemplateHash(ps) // of the template as the API server stored it
	createRevision(t, ps, hash, 1, ps.Spec.Template)
	since := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for ordinal := range int(podset.Replicas(ps)) {
		ac, err := podset.PodFromTemplate(ps, &ps.Spec.Template, ordinal, hash)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Apply(t.Context(), ac, client.FieldOwner("podset-operator"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: podset.PodName("web", ordinal)}, pod); err != nil {
			t.Fatal(err)
		}
		ready := corev1.ConditionTrue
		for _, u := range unready {
			if u == ordinal {
				ready = corev1.ConditionFalse
			}
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: since},
			{Type: podsetv1alpha1.InPlaceUpdateReadyCondition, Status: corev1.ConditionTrue, LastTransitionTime: since},
		}
		if err := env.Client.Status().Update(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
	}
	return ps
}

// spec is a PodSet spec of replicas pods of image, changed by each of
// changes.
func spec(replicas int32, image string, changes ...func(*podsetv1alpha1.PodSetSpec)) podsetv1alpha1.PodSetSpec {
	s := podsetv1alpha1.PodSetSpec{Replicas: ptr.To(replicas), Template: template(image)}
	for _, change := range changes {
		change(&s)
	}
	return s
}

func maxUnavailable(n int32) func(*podsetv1alpha1.PodSetSpec) {
	return func(s *podsetv1alpha1.PodSetSpec) {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{}
		}
		s.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(n))
	}
}

func partition(n int32) func(*podsetv1alpha1.PodSetSpec) {
	return func(s *podsetv1alpha1.PodSetSpec) {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{}
		}
		s.UpdateStrategy.RollingUpdate.Partition = ptr.To(n)
	}
}

// resources sets the app container's requests, and the resources whose
// change restarts it.
func resources(requests corev1.ResourceList, restartFor ...corev1.ResourceName) func(*podsetv1alpha1.PodSetSpec) {
	return func(s *podsetv1alpha1.PodSetSpec) {
		c := &s.Template.Spec.Containers[0]
		c.Resources.Requests = requests
		for _, r := range restartFor {
			c.ResizePolicy = append(c.ResizePolicy, corev1.ContainerResizePolicy{ResourceName: r, RestartPolicy: corev1.RestartContainer})
		}
	}
}

// podLines is the table's line of each pod, its columns separated by one
// space, without the pod name and its revision (a hash).
func podLines(out string) map[string]string {
	lines := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasPrefix(f[0], "web-") {
			lines[f[0]] = strings.Join(f[2:], " ")
		}
	}
	return lines
}

// rolloutLines are the lines after the table: the order of the rollout.
func rolloutLines(out string) []string {
	_, after, _ := strings.Cut(out, "\nRollout, ")
	var lines []string
	for _, line := range strings.Split(after, "\n")[1:] {
		if line != "" {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

func TestRolloutPreview(t *testing.T) {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	memory := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
	}
	cases := map[string]struct {
		live        podsetv1alpha1.PodSetSpec
		unready     []int
		next        podsetv1alpha1.PodSetSpec
		wantExit    int
		wantPods    map[string]string
		wantRollout []string
		// wantStops are what the output says of how pods stop (default:
		// the drain hook of 3 s, and no pod made without it).
		wantStops []string
	}{
		"unchanged": {
			live: spec(2, "app:v1"), next: spec(2, "app:v1"),
			wantExit: 0,
			wantPods: map[string]string{"web-0": "true unchanged", "web-1": "true unchanged"},
		},
		"labels only: in place, at once": {
			live:     spec(2, "app:v1"),
			next:     spec(2, "app:v1", func(s *podsetv1alpha1.PodSetSpec) { s.Template.Labels["release"] = "2" }),
			wantExit: 1,
			wantPods: map[string]string{
				"web-0": "true labels/annotations in place nothing restarts",
				"web-1": "true labels/annotations in place nothing restarts",
			},
			wantRollout: []string{"at once (outside maxUnavailable): web-0, web-1"},
		},
		"an image: in place, the container restarts": {
			live: spec(2, "app:v1"), next: spec(2, "app:v2"),
			wantExit: 1,
			wantPods: map[string]string{
				"web-0": "true image in place app app:v1 -> app:v2; restarts app",
				"web-1": "true image in place app app:v1 -> app:v2; restarts app",
			},
			wantRollout: []string{"first: web-1", "then, in order: web-0"},
		},
		"cpu: resized, nothing restarts": {
			live: spec(1, "app:v1", resources(cpu("100m"))), next: spec(1, "app:v1", resources(cpu("200m"))),
			wantExit:    1,
			wantPods:    map[string]string{"web-0": "true resized in place app requests.cpu 100m -> 200m; no container restarts"},
			wantRollout: []string{"first: web-0"},
		},
		"memory: resized, the container restarts per its resizePolicy": {
			live:        spec(1, "app:v1", resources(memory("64Mi"), corev1.ResourceMemory)),
			next:        spec(1, "app:v1", resources(memory("128Mi"), corev1.ResourceMemory)),
			wantExit:    1,
			wantPods:    map[string]string{"web-0": "true resized in place app requests.memory 64Mi -> 128Mi; restarts app"},
			wantRollout: []string{"first: web-0"},
		},
		"an env var: recreated, naming the field": {
			live: spec(1, "app:v1"),
			next: spec(1, "app:v2", func(s *podsetv1alpha1.PodSetSpec) {
				s.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DEBUG", Value: "1"}}
			}),
			wantExit: 1,
			wantPods: map[string]string{
				"web-0": "true recreated the template changed beyond images, labels, annotations and resources: spec.containers[app].env",
			},
			wantRollout: []string{"first: web-0"},
		},
		"a serviceName: recreated, saying why": {
			live:     spec(2, "app:v1"),
			next:     spec(2, "app:v1", func(s *podsetv1alpha1.PodSetSpec) { s.ServiceName = "web-peers" }),
			wantExit: 1,
			wantPods: map[string]string{
				"web-0": "true recreated spec.serviceName changed: a running pod's hostname and subdomain cannot change",
				"web-1": "true recreated spec.serviceName changed: a running pod's hostname and subdomain cannot change",
			},
			wantRollout: []string{"first: web-1", "then, in order: web-0"},
		},
		"a partition holds the lower ordinals": {
			live: spec(5, "app:v1", maxUnavailable(2)), next: spec(5, "app:v2", maxUnavailable(2), partition(3)),
			wantExit: 1,
			wantPods: map[string]string{
				"web-0": "true held by partition ordinal below partition 3: keeps its revision",
				"web-1": "true held by partition ordinal below partition 3: keeps its revision",
				"web-2": "true held by partition ordinal below partition 3: keeps its revision",
				"web-3": "true image in place app app:v1 -> app:v2; restarts app",
				"web-4": "true image in place app app:v1 -> app:v2; restarts app",
			},
			wantRollout: []string{"first: web-4, web-3"},
		},
		"5 pods, maxUnavailable 2: batches of 2, 2 and 1 from the highest ordinal": {
			live: spec(5, "app:v1", maxUnavailable(2)), next: spec(5, "app:v2", maxUnavailable(2)),
			wantExit:    1,
			wantRollout: []string{"first: web-4, web-3", "then, in order: web-2, web-1, web-0"},
		},
		"an unready pod goes first": {
			live: spec(5, "app:v1", maxUnavailable(2)), unready: []int{1}, next: spec(5, "app:v2", maxUnavailable(2)),
			wantExit:    1,
			wantPods:    map[string]string{"web-1": "false image in place app app:v1 -> app:v2; restarts app"},
			wantRollout: []string{"first: web-1, web-4", "then, in order: web-3, web-2, web-0"},
		},
		"a longer drain: the running pods' hooks sleep less, and the preview names them": {
			live: spec(2, "app:v1"),
			next: spec(2, "app:v1", func(s *podsetv1alpha1.PodSetSpec) { s.DrainSeconds = ptr.To[int32](10) }),
			// The PodSet changes; no pod does.
			wantExit:  1,
			wantStops: []string{"sleep 10 s in a preStop hook", "drained only when the operator stops them until they are recreated: web-0, web-1"},
		},
		"paused: the rollout its resume starts": {
			live:        spec(2, "app:v1"),
			next:        spec(2, "app:v2", func(s *podsetv1alpha1.PodSetSpec) { s.Paused = true }),
			wantExit:    1,
			wantPods:    map[string]string{"web-0": "true image in place app app:v1 -> app:v2; restarts app"},
			wantRollout: []string{"first: web-1", "then, in order: web-0"},
			wantStops:   []string{"sleep 3 s in a preStop hook", "Paused (spec.paused): no pod is updated until the PodSet is resumed (kubectl podset rollout resume web); then:"},
		},
		"OnDelete holds every pod; the PodSet still changes": {
			live:     spec(1, "app:v1"),
			next:     spec(1, "app:v2", func(s *podsetv1alpha1.PodSetSpec) { s.UpdateStrategy.Type = podsetv1alpha1.OnDeleteStrategyType }),
			wantExit: 1,
			wantPods: map[string]string{"web-0": "true held until deleted (OnDelete) takes the new revision when deleted"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := namespace(t)
			runningPodSet(t, ns, tc.live, tc.unready...)
			out, errOut, err := kubectlPodset(t.Context(), t, ns, "rollout", "preview", "-f", manifest(t, tc.next))
			t.Logf("kubectl podset rollout preview -f web.yaml (exit %d):\n%s", ExitCode(err), out)
			if got := ExitCode(err); got != tc.wantExit || errOut != "" {
				t.Fatalf("exit %d (%v), stderr %q; want exit %d and nothing on stderr", got, err, errOut, tc.wantExit)
			}
			checkPreviewPods(t, out, tc.wantPods, tc.wantRollout)
			checkPreviewStops(t, out, tc.wantStops)
		})
	}
}

// checkPreviewPods checks a preview's line for each pod of wantPods and
// its rollout's lines (none: "No pod changes.").
func checkPreviewPods(t *testing.T, out string, wantPods map[string]string, wantRollout []string) {
	t.Helper()
	pods := podLines(out)
	for pod, want := range wantPods {
		if pods[pod] != want {
			t.Errorf("%s: %q, want %q", pod, pods[pod], want)
		}
	}
	if got := rolloutLines(out); !equalLines(got, wantRollout) {
		t.Errorf("rollout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantRollout, "\n"))
	}
	if wantRollout == nil && !strings.Contains(out, "No pod changes.") {
		t.Errorf("no rollout, but the output does not say so")
	}
}

// checkPreviewStops checks that a preview says each of wantStops of how
// the pods stop; none: the default drain hook, which every pod has.
func checkPreviewStops(t *testing.T, out string, wantStops []string) {
	t.Helper()
	if wantStops == nil {
		if strings.Contains(out, "without a hook that long") {
			t.Errorf("the output names pods made without the drain hook, but every pod has it")
		}
		wantStops = []string{"its containers sleep 3 s in a preStop hook before SIGTERM"}
	}
	for _, want := range wantStops {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q of how pods stop", want)
		}
	}
}

func equalLines(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// TestRolloutPreviewOfANewPodSet: every pod will be created, and the dry
// run creates nothing.
func TestRolloutPreviewOfANewPodSet(t *testing.T) {
	ns := namespace(t)
	out, errOut, err := kubectlPodset(t.Context(), t, ns, "rollout", "preview", "-f", manifest(t, spec(3, "app:v1")))
	t.Logf("kubectl podset rollout preview -f web.yaml (exit %d):\n%s", ExitCode(err), out)
	if ExitCode(err) != 1 || errOut != "" {
		t.Fatalf("exit %d (%v), stderr %q; want 1", ExitCode(err), err, errOut)
	}
	if !strings.Contains(out, "podset.podset.dev/web does not exist yet: every pod will be created (3, revision web-") {
		t.Errorf("the output does not say every pod will be created:\n%s", out)
	}
	pods := podLines(out)
	for _, pod := range []string{"web-0", "web-1", "web-2"} {
		if pods[pod] != "- created" {
			t.Errorf("%s: %q, want created", pod, pods[pod])
		}
	}
	if got := rolloutLines(out); !equalLines(got, []string{"at once (outside maxUnavailable): web-0, web-1, web-2"}) {
		t.Errorf("rollout: %q", got)
	}
	err = env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &podsetv1alpha1.PodSet{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("after the preview, getting the PodSet: %v, want NotFound (a dry run writes nothing)", err)
	}
}

// TestRolloutPreviewRefused: the dry run goes through admission, so a
// PodSet the API server refuses is an error (exit 2) that quotes it.
func TestRolloutPreviewRefused(t *testing.T) {
	ns := namespace(t)
	runningPodSet(t, ns, spec(1, "app:v1"))
	bad := spec(1, "app:v2", func(s *podsetv1alpha1.PodSetSpec) {
		s.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	})
	_, errOut, err := kubectlPodset(t.Context(), t, ns, "rollout", "preview", "-f", manifest(t, bad))
	if ExitCode(err) != 2 || !strings.Contains(errOut, "error: the API server refused the PodSet (dry run)") || !strings.Contains(errOut, "privileged") {
		t.Errorf("exit %d, stderr %q; want 2 and the API server's refusal", ExitCode(err), errOut)
	}
	if _, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "preview"); ExitCode(err) != 2 {
		t.Errorf("without -f: exit %d, want 2", ExitCode(err))
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-0"}, pod); err != nil || pod.Spec.Containers[0].Image != "app:v1" {
		t.Errorf("web-0 after the preview: %v, image %q", err, pod.Spec.Containers[0].Image)
	}
}

// TestRolloutPreviewJSON: -o json prints the same preview for programs.
func TestRolloutPreviewJSON(t *testing.T) {
	ns := namespace(t)
	runningPodSet(t, ns, spec(3, "app:v1", maxUnavailable(2)))
	out, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "preview", "-f", manifest(t, spec(3, "app:v2", maxUnavailable(2))), "-o", "json")
	if ExitCode(err) != 1 {
		t.Fatalf("exit %d (%v)", ExitCode(err), err)
	}
	var got struct {
		Changed bool
		Batches [][]string
		Pods    []struct{ Name, Change string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !got.Changed || len(got.Pods) != 3 || got.Pods[2].Change != "image in place" ||
		!equalLines([]string{strings.Join(got.Batches[0], ","), strings.Join(got.Batches[1], ",")}, []string{"web-2,web-1", "web-0"}) {
		t.Errorf("-o json: %+v", got)
	}
}

// TestRolloutPreviewServerSide: a manifest without replicas replaces the
// PodSet's replicas with the default (1) by default, while a server-side
// apply by another manager keeps what the live PodSet has (an autoscaler's
// replicas), as a GitOps tool's apply does.
func TestRolloutPreviewServerSide(t *testing.T) {
	ns := namespace(t)
	runningPodSet(t, ns, spec(3, "app:v1"))
	file := manifest(t, spec(3, "app:v1", func(s *podsetv1alpha1.PodSetSpec) { s.Replicas = nil }))

	out, _, err := kubectlPodset(t.Context(), t, ns, "rollout", "preview", "-f", file)
	if pods := podLines(out); ExitCode(err) != 1 || pods["web-1"] != "true deleted ordinal at or above replicas 1" || pods["web-0"] != "true unchanged" {
		t.Errorf("replace: exit %d (%v):\n%s", ExitCode(err), err, out)
	}
	out, errOut, err := kubectlPodset(t.Context(), t, ns, "rollout", "preview", "-f", file, "--server-side", "--field-manager=argocd-controller")
	if ExitCode(err) != 0 || len(podLines(out)) != 3 || !strings.Contains(out, "No pod changes.") {
		t.Errorf("--server-side: exit %d (%v), stderr %q:\n%s", ExitCode(err), err, errOut, out)
	}
}
