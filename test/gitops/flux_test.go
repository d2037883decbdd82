//go:build gitops

package gitops

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// Images of the revisions. kwok runs any image.
const (
	imageV1   = "registry.invalid/web:1"
	imageV2   = "registry.invalid/web:2"
	imageHand = "registry.invalid/web:hand-edited"
)

// kustomizeManager is the kustomize-controller's field manager.
const kustomizeManager = "kustomize-controller"

// podSetManifest is the PodSet web of namespace ns as a repository holds
// it: three replicas (none when replicas is 0: the field left to an HPA)
// running image, plus extra fields of spec as YAML lines.
func podSetManifest(ns, name, image string, replicas int, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: podset.dev/v1alpha1\nkind: PodSet\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n", name, ns)
	if replicas > 0 {
		fmt.Fprintf(&b, "  replicas: %d\n", replicas)
	}
	for _, line := range extra {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	fmt.Fprintf(&b, `  template:
    metadata:
      labels: {app: %s}
    spec:
      securityContext: {runAsUser: 65532}
      containers:
      - name: app
        image: %s
`, name, image)
	return b.String()
}

// configMapManifest is a ConfigMap every revision carries, so that a
// revision without the PodSet still applies something.
func configMapManifest(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %s\ndata:\n  color: blue\n", ns)
}

// newNamespace makes a namespace for a test and deletes it at the end.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := testenv.Namespace(t, suite.client, prefix, nil)
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		_ = suite.client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return ns
}

// podSetReady is nil when the PodSet is Ready at its generation with every
// pod updated, and says what is missing otherwise.
func podSetReady(ps *podsetv1alpha1.PodSet) error {
	ready := apimeta.FindStatusCondition(ps.Status.Conditions, podsetv1alpha1.ReadyCondition)
	switch {
	case ps.Status.ObservedGeneration != ps.Generation:
		return fmt.Errorf("PodSet observedGeneration %d, generation %d", ps.Status.ObservedGeneration, ps.Generation)
	case ready == nil || ready.Status != metav1.ConditionTrue:
		return fmt.Errorf("PodSet not Ready: %+v", ready)
	case ps.Status.UpdatedReplicas != *ps.Spec.Replicas || ps.Status.AvailableReplicas != *ps.Spec.Replicas:
		return fmt.Errorf("PodSet has %d updated and %d available of %d", ps.Status.UpdatedReplicas, ps.Status.AvailableReplicas, *ps.Spec.Replicas)
	}
	return nil
}

// watchUntilReady polls the Kustomization ns/name and its PodSet until the
// Kustomization is Ready at revision, and fails the test if it ever is
// while the PodSet is not Ready at its generation. It returns how many
// polls saw the PodSet not Ready (the rollout under way) while the
// Kustomization waited.
func watchUntilReady(t *testing.T, ns, name, revision string) (waiting int) {
	t.Helper()
	eventually(t, "Kustomization "+ns+"/"+name+" Ready at "+revision+", never before its PodSet", func(ctx context.Context) error {
		k, err := getKustomization(ctx, ns, name)
		if err != nil {
			return err
		}
		ps := &podsetv1alpha1.PodSet{}
		psErr := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ps)
		if psErr == nil {
			psErr = podSetReady(ps)
		}
		if !k.readyAt(revision) {
			if psErr != nil {
				waiting++
			}
			return fmt.Errorf("Kustomization not Ready at %s: %s %s", revision, k.ready().Reason, k.ready().Message)
		}
		if psErr != nil {
			t.Fatalf("Kustomization Ready at %s (%s) while %v", revision, k.ready().Message, psErr)
		}
		return nil
	})
	return waiting
}

// pods returns the live pods of the PodSet ns/name by name.
func pods(ctx context.Context, ns, name string) (map[string]corev1.Pod, error) {
	var list corev1.PodList
	if err := suite.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{podsetv1alpha1.NameLabel: name}); err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out, nil
}

// checkPods is nil when the PodSet ns/name has exactly n live pods, each
// Running and Ready with image; when uids is not nil, they must also be
// the same pods (same UIDs), updated in place.
func checkPods(ctx context.Context, ns, name string, n int, image string, uids map[string]types.UID) error {
	live, err := pods(ctx, ns, name)
	if err != nil {
		return err
	}
	if len(live) != n {
		return fmt.Errorf("%d live pods, want %d", len(live), n)
	}
	for _, p := range live {
		if got := p.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("pod %s runs %s, want %s", p.Name, got, image)
		}
		if !testenv.RunningAndReady(&p) {
			return fmt.Errorf("pod %s is not Running and Ready", p.Name)
		}
		if uids != nil && uids[p.Name] != p.UID {
			return fmt.Errorf("pod %s was recreated (UID %s, was %s)", p.Name, p.UID, uids[p.Name])
		}
	}
	return nil
}

// podUIDs is the UIDs of the PodSet's live pods by name.
func podUIDs(t *testing.T, ns, name string) map[string]types.UID {
	t.Helper()
	live, err := pods(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for n, p := range live {
		uids[n] = p.UID
	}
	return uids
}

// getPodSet reads the PodSet ns/name.
func getPodSet(t *testing.T, ns, name string) *podsetv1alpha1.PodSet {
	t.Helper()
	ps := &podsetv1alpha1.PodSet{}
	if err := suite.client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, ps); err != nil {
		t.Fatal(err)
	}
	return ps
}

// replicasManager is the field manager that owns the PodSet's
// spec.replicas, with its operation and subresource.
func replicasManager(ps *podsetv1alpha1.PodSet) string {
	for _, mf := range ps.ManagedFields {
		if mf.FieldsV1 != nil && mf.Subresource != "status" && strings.Contains(mf.FieldsV1.GetRawString(), `"f:replicas"`) {
			if mf.Subresource != "" {
				return fmt.Sprintf("%s (%s, subresource %s)", mf.Manager, mf.Operation, mf.Subresource)
			}
			return fmt.Sprintf("%s (%s)", mf.Manager, mf.Operation)
		}
	}
	return "none"
}

// kubectlScale runs `kubectl scale podset` as a user would.
func kubectlScale(t *testing.T, ns, name string, replicas int) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), suite.kubectl, "--kubeconfig", suite.kubeconfig,
		"--namespace", ns, "scale", "podset", name, fmt.Sprintf("--replicas=%d", replicas)).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
}

// noWritesDuring checks that reconciling the Kustomization ns/name twice,
// at an unchanged revision, sends no write to its PodSet (by anyone: Flux,
// the operator's status writes) and leaves its resourceVersion alone. It
// logs the requests Flux did send (reads and dry runs).
func noWritesDuring(t *testing.T, ns, name, revision string) {
	t.Helper()
	before := getPodSet(t, ns, name)
	mark := markAudit(t)
	reconcile(t, ns, name, revision)
	reconcile(t, ns, name, revision)
	// Audit events are written once the request is answered; the last
	// requests of the second reconcile are in by the time it reports.
	time.Sleep(2 * time.Second)
	var writes, dryRuns int
	for _, e := range requestsSince(t, mark, ns, name) {
		switch {
		case e.write() && e.dryRun():
			dryRuns++
		case e.write():
			writes++
			t.Errorf("a write to PodSet %s/%s during two reconciles of an unchanged revision: %s", ns, name, e)
		}
	}
	t.Logf("two reconciles of an unchanged revision: %d writes, %d dry-run applies on PodSet %s/%s", writes, dryRuns, ns, name)
	if after := getPodSet(t, ns, name); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("PodSet resourceVersion moved from %s to %s", before.ResourceVersion, after.ResourceVersion)
	}
}

// TestFluxDrivesAPodSet is a PodSet's life under Flux, one revision after
// another: apply and wait, a new image rolled in place, reconciles of an
// unchanged revision sending nothing, a hand edit put back, `kubectl
// scale` beside Flux and the field left to an HPA, and prune.
func TestFluxDrivesAPodSet(t *testing.T) {
	f := &fluxRun{ns: newNamespace(t, "flux-"), name: "web"}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"apply with wait: Ready only once the PodSet is Ready at its generation", f.applyWithWait},
		{"a new revision rolls the pods in place; Ready again only once the rollout is done", f.rollInPlace},
		{"no drift loop: reconciles of an unchanged revision send no write to the PodSet", f.noDriftLoop},
		{"drift correction: a hand edit of the spec is put back, and the operator rolls back", f.correctDrift},
		{"kubectl scale beside Flux: Flux's apply takes spec.replicas back", f.scaleBesideFlux},
		{"spec.replicas left to kubectl scale (or an HPA): removed by the Kustomization's patch, as config/gitops/flux does", f.replicasLeftToScale},
		{"prune: a revision without the PodSet deletes it and its pods", f.prune},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			t.Fatalf("step %q failed; the steps after it need it", step.name)
		}
	}
}

// fluxRun is TestFluxDrivesAPodSet's PodSet under Flux: its namespace and
// name, the UIDs of its pods before the rollout in place, and the
// revision Flux last applied. Each step is a method.
type fluxRun struct {
	ns, name string
	uids     map[string]types.UID
	revision string
}

// files is the repository's files at a revision: the settings ConfigMap
// and, unless empty, the PodSet.
func (f *fluxRun) files(podset string) map[string]string {
	files := map[string]string{"settings.yaml": configMapManifest(f.ns)}
	if podset != "" {
		files["podset.yaml"] = podset
	}
	return files
}

// applyWithWait: apply with wait: Ready only once the PodSet is Ready at its generation.
func (f *fluxRun) applyWithWait(t *testing.T) {
	f.revision = publishRevision(t, f.ns, f.name, f.files(podSetManifest(f.ns, f.name, imageV1, 3)))
	applyKustomization(t, f.ns, f.name, 3*time.Minute, nil)
	waiting := watchUntilReady(t, f.ns, f.name, f.revision)
	t.Logf("the Kustomization waited through %d polls of the PodSet coming up", waiting)
	eventually(t, "3 pods on "+imageV1, func(ctx context.Context) error { return checkPods(ctx, f.ns, f.name, 3, imageV1, nil) })
	eventWith(t, f.ns, f.name, corev1.EventTypeNormal, "PodSet/"+f.ns+"/"+f.name+" created")
	eventWith(t, f.ns, f.name, corev1.EventTypeNormal, "Health check passed")
	ps := getPodSet(t, f.ns, f.name)
	t.Logf("PodSet generation %d, observedGeneration %d, managers: %s", ps.Generation, ps.Status.ObservedGeneration, managers(ps))
	f.uids = podUIDs(t, f.ns, f.name)
}

// rollInPlace: a new revision rolls the pods in place; Ready again only once the rollout is done.
func (f *fluxRun) rollInPlace(t *testing.T) {
	f.revision = publishRevision(t, f.ns, f.name, f.files(podSetManifest(f.ns, f.name, imageV2, 3)))
	waiting := watchUntilReady(t, f.ns, f.name, f.revision)
	if err := checkPods(t.Context(), f.ns, f.name, 3, imageV2, f.uids); err != nil {
		t.Fatal(err)
	}
	if waiting == 0 {
		t.Error("the Kustomization was never seen waiting on the PodSet's rollout")
	}
	t.Logf("the Kustomization waited through %d polls of the rollout; the 3 pods kept their UIDs", waiting)
	eventWith(t, f.ns, f.name, corev1.EventTypeNormal, "PodSet/"+f.ns+"/"+f.name+" configured")
}

// noDriftLoop: no drift loop: reconciles of an unchanged revision send no write to the PodSet.
func (f *fluxRun) noDriftLoop(t *testing.T) {
	noWritesDuring(t, f.ns, f.name, f.revision)
}

// correctDrift: drift correction: a hand edit of the spec is put back, and the operator rolls back.
func (f *fluxRun) correctDrift(t *testing.T) {
	ps := getPodSet(t, f.ns, f.name)
	patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, imageHand)
	if err := suite.client.Patch(t.Context(), ps, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the operator rolls the hand-edited image out", func(ctx context.Context) error {
		live, err := pods(ctx, f.ns, f.name)
		if err != nil {
			return err
		}
		for _, p := range live {
			if p.Spec.Containers[0].Image == imageHand {
				return nil
			}
		}
		return errors.New("no pod on the hand-edited image yet")
	})
	mark := markAudit(t)
	reconcile(t, f.ns, f.name, f.revision)
	eventually(t, "the PodSet's spec is back to "+imageV2+" and its pods with it, in place", func(ctx context.Context) error {
		ps := &podsetv1alpha1.PodSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(getPodSet(t, f.ns, f.name)), ps); err != nil {
			return err
		}
		if got := ps.Spec.Template.Spec.Containers[0].Image; got != imageV2 {
			return fmt.Errorf("spec image %s", got)
		}
		if err := podSetReady(ps); err != nil {
			return err
		}
		return checkPods(ctx, f.ns, f.name, 3, imageV2, f.uids)
	})
	var fluxWrites []string
	for _, e := range requestsSince(t, mark, f.ns, f.name) {
		if e.write() && !e.dryRun() && e.ObjectRef.Subresource == "" {
			fluxWrites = append(fluxWrites, e.String())
		}
	}
	t.Logf("writes to the PodSet's spec after the hand edit: %q", fluxWrites)
	eventWith(t, f.ns, f.name, corev1.EventTypeNormal, "PodSet/"+f.ns+"/"+f.name+" configured")
}

// scaleBesideFlux: kubectl scale beside Flux: Flux's apply takes spec.replicas back.
func (f *fluxRun) scaleBesideFlux(t *testing.T) {
	kubectlScale(t, f.ns, f.name, 5)
	eventually(t, "5 pods", func(ctx context.Context) error { return checkPods(ctx, f.ns, f.name, 5, imageV2, nil) })
	scaled := replicasManager(getPodSet(t, f.ns, f.name))
	if strings.HasPrefix(scaled, kustomizeManager) {
		t.Fatalf("after kubectl scale, spec.replicas is still owned by %s", scaled)
	}
	t.Logf("after kubectl scale, spec.replicas is owned by %s", scaled)
	reconcile(t, f.ns, f.name, f.revision)
	eventually(t, "3 pods again", func(ctx context.Context) error { return checkPods(ctx, f.ns, f.name, 3, imageV2, nil) })
	ps := getPodSet(t, f.ns, f.name)
	if *ps.Spec.Replicas != 3 || !strings.HasPrefix(replicasManager(ps), kustomizeManager) {
		t.Fatalf("after a reconcile, spec.replicas is %d owned by %s; want 3 owned by %s", *ps.Spec.Replicas, replicasManager(ps), kustomizeManager)
	}
	t.Logf("Flux wins: spec.replicas back to 3, owned by %s", replicasManager(ps))
}

// replicasLeftToScale: spec.replicas left to kubectl scale (or an HPA): removed by the Kustomization's patch, as config/gitops/flux does.
func (f *fluxRun) replicasLeftToScale(t *testing.T) {
	applyKustomization(t, f.ns, f.name, 3*time.Minute, map[string]any{"patches": []any{map[string]any{
		"target": map[string]any{"group": "podset.dev", "kind": "PodSet"},
		"patch":  "- op: remove\n  path: /spec/replicas\n",
	}}})
	watchUntilReady(t, f.ns, f.name, f.revision)
	ps := getPodSet(t, f.ns, f.name)
	t.Logf("with spec.replicas patched out: spec.replicas is %d (owned by %s)", *ps.Spec.Replicas, replicasManager(ps))
	kubectlScale(t, f.ns, f.name, 4)
	// Its status settled too: the operator's write of the fourth pod's
	// readiness is the scale's, not a drift loop's, and must not land in
	// the window below.
	eventually(t, "4 pods, and the PodSet Ready with them", func(ctx context.Context) error {
		ps := &podsetv1alpha1.PodSet{}
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.name}, ps); err != nil {
			return err
		}
		if err := podSetReady(ps); err != nil {
			return err
		}
		return checkPods(ctx, f.ns, f.name, 4, imageV2, nil)
	})
	ps = getPodSet(t, f.ns, f.name)
	t.Logf("after kubectl scale, spec.replicas is owned by %s; managers: %s", replicasManager(ps), managers(ps))
	noWritesDuring(t, f.ns, f.name, f.revision)
	ps = getPodSet(t, f.ns, f.name)
	if *ps.Spec.Replicas != 4 {
		t.Fatalf("spec.replicas is %d after Flux's reconciles, want the scale's 4", *ps.Spec.Replicas)
	}
	t.Logf("spec.replicas stays 4, owned by %s", replicasManager(ps))
}

// prune: prune: a revision without the PodSet deletes it and its pods.
func (f *fluxRun) prune(t *testing.T) {
	f.revision = publishRevision(t, f.ns, f.name, f.files(""))
	eventually(t, "Kustomization Ready at the revision without the PodSet", func(ctx context.Context) error {
		k, err := getKustomization(ctx, f.ns, f.name)
		if err != nil {
			return err
		}
		if !k.readyAt(f.revision) {
			return fmt.Errorf("not Ready at %s: %s", f.revision, k.ready().Message)
		}
		return nil
	})
	eventWith(t, f.ns, f.name, corev1.EventTypeNormal, "PodSet/"+f.ns+"/"+f.name+" deleted")
	eventually(t, "the PodSet and its pods are gone", func(ctx context.Context) error {
		err := suite.client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.name}, &podsetv1alpha1.PodSet{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("PodSet still there (%v)", err)
		}
		var list corev1.PodList
		if err := suite.client.List(ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{podsetv1alpha1.NameLabel: f.name}); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d pods left", len(list.Items))
		}
		return nil
	})
}

// TestStalledPodSetFailsTheKustomization applies a PodSet whose pod can
// never be scheduled (a nodeSelector no node matches) with a short
// progressDeadlineSeconds: the PodSet goes Stalled, and the Kustomization
// fails its health check at once (fail fast), long before its timeout. A
// fixed revision makes both Ready again.
func TestStalledPodSetFailsTheKustomization(t *testing.T) {
	ns := newNamespace(t, "flux-stalled-")
	const name, timeout = "stuck", 3 * time.Minute
	podset := podSetManifest(ns, name, imageV1, 1, "progressDeadlineSeconds: 10")
	podset = strings.Replace(podset, "      securityContext:", "      nodeSelector: {podset.dev/no-such-node: \"true\"}\n      securityContext:", 1)
	revision := publishRevision(t, ns, name, map[string]string{"podset.yaml": podset})
	start := time.Now()
	applyKustomization(t, ns, name, timeout, nil)

	ready := healthCheckFails(t, ns, name, revision)
	took := time.Since(start)
	t.Logf("Kustomization Ready=False %s after %v: %s", ready.Reason, took.Round(time.Second), ready.Message)
	if took >= timeout {
		t.Errorf("the health check failed after %v, its timeout %v: it should fail as soon as the PodSet is Stalled", took, timeout)
	}
	want := fmt.Sprintf("PodSet/%s/%s status: 'Failed'", ns, name)
	if !strings.Contains(ready.Message, want) {
		t.Errorf("the Kustomization's message %q does not say %q", ready.Message, want)
	}
	event := eventWith(t, ns, name, corev1.EventTypeWarning, "health check failed", want)

	ps := getPodSet(t, ns, name)
	stalled := apimeta.FindStatusCondition(ps.Status.Conditions, podsetv1alpha1.StalledCondition)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != podsetv1alpha1.ProgressDeadlineExceededReason {
		t.Fatalf("PodSet Stalled condition %+v, want True %s", stalled, podsetv1alpha1.ProgressDeadlineExceededReason)
	}
	t.Logf("PodSet Stalled %s: %s", stalled.Reason, stalled.Message)
	t.Logf("the PodSet's Stalled message is in the Kustomization's Ready message: %v, in its event: %v",
		strings.Contains(ready.Message, stalled.Message), strings.Contains(event, stalled.Message))

	// The fix is a new revision: the stuck pod is replaced first.
	revision = publishRevision(t, ns, name, map[string]string{"podset.yaml": podSetManifest(ns, name, imageV1, 1, "progressDeadlineSeconds: 10")})
	watchUntilReady(t, ns, name, revision)
}

// managers lists the PodSet's field managers with their operation and
// subresource.
func managers(ps *podsetv1alpha1.PodSet) string {
	var out []string
	for _, mf := range ps.ManagedFields {
		s := mf.Manager + " " + string(mf.Operation)
		if mf.Subresource != "" {
			s += " " + mf.Subresource
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}
