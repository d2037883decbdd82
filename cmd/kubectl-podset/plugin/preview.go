package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// errChanges is preview's answer when the PodSet or its pods would change:
// exit code 1, as `kubectl diff` exits when it finds differences. It is
// not an error to print.
var errChanges = &exitError{code: 1, err: errors.New("the PodSet or its pods would change")}

// exitError is an error with the exit code it ends the plugin with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is the plugin's exit code for the error a command returned: 0
// for none, 1 for most errors, and for rollout preview, as for kubectl
// diff, 1 when something would change and 2 for an error.
func ExitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e.code
	default:
		return 1
	}
}

// previewError makes an error of preview exit with 2: 1 means "changes".
func previewError(err error) error {
	if err == nil || errors.Is(err, errChanges) {
		return err
	}
	return &exitError{code: 2, err: err}
}

// applyMode is how the dry run sends the manifest: an update that
// replaces the PodSet (the default, as kubectl replace and a client-side
// apply of a complete manifest would leave it), or a server-side apply by
// a field manager, which keeps the fields other managers own.
type applyMode struct {
	serverSide     bool
	fieldManager   string
	forceConflicts bool
}

func newPreviewCommand(o *options) *cobra.Command {
	var filename, output string
	var mode applyMode
	cmd := &cobra.Command{
		Use:   "preview -f FILENAME",
		Short: "Show what applying a PodSet would do to its pods, and in which order, without applying it",
		Long: `Show what applying a PodSet manifest would do to its pods, before it is
applied: which pods stay unchanged, which get new labels or annotations in
place, a new image in place (those containers restart), new cpu or memory
through pods/resize (and whether a container restarts, per its
resizePolicy), which are recreated and the template field that forces it,
and which the partition (or OnDelete) holds back. Then the order the
rollout takes the pods in, as a rolling window under maxUnavailable:
unready out-of-date pods first, then from the highest ordinal; the first
as many as the budget allows, then each next one as soon as one before it
is available again (a Ready pod is drained first, drainSeconds).

The manifest is first sent to the API server as a dry run (dryRun=All), so
the PodSet is defaulted and validated by admission exactly as a write would
be, and nothing is written: by default an update that replaces the PodSet
with the manifest (a create when it does not exist yet); with --server-side
a server-side apply by --field-manager, which keeps the fields other
managers own (replicas an autoscaler set, a template annotation a restart
set): use the manager of your GitOps tool (argocd-controller,
kustomize-controller) to preview its sync. The operator's own planner then
decides, from that PodSet, its pods and its ControllerRevisions.

Exit status: 0 when nothing would change, 1 when the PodSet or its pods
would, as 'kubectl diff'; 2 or more on an error.`,
		Example: `  # What would this change do to the pods of web?
  kubectl podset rollout preview -f web.yaml

  # In a CI job: fail review when a change would touch running pods
  kubectl podset rollout preview -f web.yaml || echo "this change rolls out"

  # What Flux's server-side apply of the manifest would do
  kubectl podset rollout preview -f web.yaml --server-side --field-manager=kustomize-controller

  # The same, for programs
  kubectl podset rollout preview -f web.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return previewError(o.preview(cmd.Context(), filename, output, mode))
		},
	}
	cmd.Flags().StringVarP(&filename, "filename", "f", "", "The PodSet manifest to preview (YAML or JSON; - reads standard input).")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: empty for a table, or json.")
	cmd.Flags().BoolVar(&mode.serverSide, "server-side", false, "Preview a server-side apply of the manifest instead of a replace.")
	cmd.Flags().StringVar(&mode.fieldManager, "field-manager", "kubectl", "The field manager of the server-side apply (with --server-side).")
	cmd.Flags().BoolVar(&mode.forceConflicts, "force-conflicts", false, "With --server-side, take fields other managers own instead of failing on a conflict.")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		// wrapErrors prints only what RunE returns. As there, the exit
		// code reports the error whether or not this line gets out.
		_, _ = fmt.Fprintf(o.streams.ErrOut, "error: %v\n", err)
		return previewError(err)
	})
	return cmd
}

// preview dry-runs the manifest in filename and prints what it would do.
func (o *options) preview(ctx context.Context, filename, output string, mode applyMode) error {
	if filename == "" {
		return errors.New("must specify -f (--filename): the PodSet manifest to preview")
	}
	if output != "" && output != "json" {
		return fmt.Errorf("unknown output format %q: use json, or no -o for a table", output)
	}
	obj, err := readPodSet(filename, o.streams.In)
	if err != nil {
		return err
	}
	c, ns, err := o.client()
	if err != nil {
		return err
	}
	if err := o.namespaceOf(obj, ns); err != nil {
		return err
	}
	live := &podsetv1alpha1.PodSet{}
	err = c.Get(ctx, client.ObjectKeyFromObject(obj), live)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	ps, err := dryRun(ctx, c, obj, live, exists, mode)
	if err != nil {
		return err
	}
	var pods []corev1.Pod
	var history []appsv1.ControllerRevision
	if exists {
		podList := &corev1.PodList{}
		if err := c.List(ctx, podList, client.InNamespace(ps.Namespace), client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name}); err != nil {
			return err
		}
		revList := &appsv1.ControllerRevisionList{}
		if err := c.List(ctx, revList, client.InNamespace(ps.Namespace), client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name}); err != nil {
			return err
		}
		pods, history = podList.Items, revList.Items
	}
	revs := podset.NewRevisions(ps, history)
	view := podset.NewView(ps, revs, pods, time.Now())
	p := view.Preview()
	// As kubectl diff: a change of the PodSet counts, also one that
	// touches no pod (the partition holds them all, a new deadline).
	changed := !exists || p.Changed() || !equality.Semantic.DeepEqual(live.Spec, ps.Spec)
	var from *podsetv1alpha1.PodSet
	if exists {
		from = live
	}
	if output == "json" {
		err = printPreviewJSON(o.streams.Out, ps, from, revs, &p, changed)
	} else {
		err = printPreview(o.streams.Out, ps, from, revs, &p)
	}
	if err != nil {
		return err
	}
	if changed {
		return errChanges
	}
	return nil
}

// readPodSet reads the one PodSet of a manifest file (or standard input).
func readPodSet(filename string, stdin io.Reader) (*unstructured.Unstructured, error) {
	r := stdin
	if filename != "-" {
		f, err := os.Open(filename)
		if err != nil {
			return nil, err
		}
		// Closing a file only read from loses nothing, whatever it says.
		defer func() { _ = f.Close() }()
		r = f
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var found *unstructured.Unstructured
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", filename, err)
		}
		if len(doc) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: doc}
		if found != nil {
			return nil, fmt.Errorf("%s holds more than one object: preview takes one PodSet", filename)
		}
		if gvk := u.GroupVersionKind(); gvk != podsetv1alpha1.GroupVersion.WithKind("PodSet") {
			return nil, fmt.Errorf("%s holds a %s, not a PodSet (%s)", filename, gvk.GroupKind(), podsetv1alpha1.GroupVersion)
		}
		found = u
	}
	if found == nil {
		return nil, fmt.Errorf("%s holds no PodSet", filename)
	}
	return found, nil
}

// namespaceOf puts the PodSet in the namespace of the flags (or the
// kubeconfig context's) unless the manifest names one; a manifest and an
// explicit --namespace that disagree is an error, as for kubectl apply.
func (o *options) namespaceOf(obj *unstructured.Unstructured, ns string) error {
	explicit := o.flags.Namespace != nil && *o.flags.Namespace != ""
	switch {
	case obj.GetNamespace() == "":
		obj.SetNamespace(ns)
	case explicit && obj.GetNamespace() != ns:
		return fmt.Errorf("the namespace from the provided object %q does not match the namespace %q. You must pass '--namespace=%s' to perform this operation",
			obj.GetNamespace(), ns, obj.GetNamespace())
	}
	return nil
}

// dryRun sends the manifest as a dry run (dryRun=All, strict field
// validation): a server-side apply, an update of the live PodSet, or a
// create, and returns the PodSet the API server would store, defaulted and
// admitted.
func dryRun(ctx context.Context, c client.Client, obj *unstructured.Unstructured, live *podsetv1alpha1.PodSet, exists bool, mode applyMode) (*podsetv1alpha1.PodSet, error) {
	dry := obj.DeepCopy()
	var err error
	switch {
	case mode.serverSide:
		body, merr := json.Marshal(obj.Object)
		if merr != nil {
			return nil, merr
		}
		opts := []client.PatchOption{client.DryRunAll, client.FieldOwner(mode.fieldManager), client.FieldValidation("Strict")}
		if mode.forceConflicts {
			opts = append(opts, client.ForceOwnership)
		}
		err = c.Patch(ctx, dry, client.RawPatch(types.ApplyPatchType, body), opts...)
	case exists:
		dry.SetResourceVersion(live.ResourceVersion)
		dry.SetUID(live.UID)
		err = c.Update(ctx, dry, client.DryRunAll, client.FieldOwner(FieldManager), client.FieldValidation("Strict"))
	default:
		err = c.Create(ctx, dry, client.DryRunAll, client.FieldOwner(FieldManager), client.FieldValidation("Strict"))
	}
	if err != nil {
		return nil, fmt.Errorf("the API server refused the PodSet (dry run): %w", err)
	}
	ps := &podsetv1alpha1.PodSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dry.Object, ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// printPreview prints the preview as a table and the rollout's order.
func printPreview(w io.Writer, ps, live *podsetv1alpha1.PodSet, revs *podset.Revisions, p *podset.Preview) error {
	out := &printer{w: w}
	newRev := podset.RevisionName(ps, revs.Update)
	switch {
	case live == nil:
		out.printf("podset.podset.dev/%s does not exist yet: every pod will be created (%d, revision %s)\n",
			ps.Name, podset.Replicas(ps), newRev)
	case podset.TemplateHash(live) == revs.Update:
		out.printf("podset.podset.dev/%s: template unchanged (revision %s); %s\n", ps.Name, newRev, strategy(ps, p))
	default:
		out.printf("podset.podset.dev/%s: revision %s -> %s; %s\n",
			ps.Name, podset.RevisionName(live, podset.TemplateHash(live)), newRev, strategy(ps, p))
	}
	if len(p.Pods) > 0 {
		rows := [][]string{{"POD", "REVISION", "READY", "CHANGE", "DETAIL"}}
		for i := range p.Pods {
			c := &p.Pods[i]
			rev, ready := "-", "-"
			if c.Pod != nil {
				rev, ready = podset.RevisionName(ps, c.Hash), fmt.Sprint(c.Ready)
			}
			rows = append(rows, []string{c.Name, rev, ready, string(c.Change), detail(ps, revs, c)})
		}
		out.table(rows)
	}
	out.printf("%s\n", stops(ps, p))
	if len(p.AtOnce) == 0 && len(p.Batches) == 0 && len(p.Waiting) == 0 {
		out.printf("No pod changes.\n")
		return out.err
	}
	if ps.Spec.Paused {
		out.printf("Paused (spec.paused): no pod is updated until the PodSet is resumed (kubectl podset rollout resume %s); then:\n", ps.Name)
	}
	out.printf("Rollout, maxUnavailable %d: a rolling window, unready pods first, then from the highest ordinal; the next pod starts as soon as one before it is available again:\n", p.MaxUnavailable)
	if len(p.AtOnce) > 0 {
		out.printf("  at once (outside maxUnavailable): %s\n", strings.Join(p.AtOnce, ", "))
	}
	if len(p.Batches) > 0 {
		out.printf("  first: %s\n", strings.Join(p.Batches[0], ", "))
	}
	if len(p.Batches) > 1 {
		out.printf("  then, in order: %s\n", strings.Join(slices.Concat(p.Batches[1:]...), ", "))
	}
	if len(p.Waiting) > 0 {
		out.printf("  waiting until the pods unavailable now are available again (maxUnavailable is spent): %s\n", strings.Join(p.Waiting, ", "))
	}
	return out.err
}

// stops says how the PodSet's pods stop: how long their containers sleep
// in the drain hook before SIGTERM whoever stops them, and which live pods
// were made without it.
func stops(ps *podsetv1alpha1.PodSet, p *podset.Preview) string {
	seconds := podset.DrainHookSeconds(ps, &ps.Spec.Template)
	if seconds == 0 {
		return "Stops: drainSeconds is 0: containers get SIGTERM as soon as their pod has left its Services."
	}
	s := fmt.Sprintf("Stops: whoever stops a pod (an eviction by kubectl drain or an autoscaler, kubectl delete pod, the operator), "+
		"its containers sleep %d s in a preStop hook before SIGTERM while the pod is out of its Services (an app's own preStop hook runs instead).", seconds)
	if len(p.NotDrainedByOthers) > 0 {
		s += fmt.Sprintf("\n  without a hook that long (made by an earlier release, or before drainSeconds grew), drained only when the operator stops them until they are recreated: %s", strings.Join(p.NotDrainedByOthers, ", "))
	}
	return s
}

// strategy says how the PodSet rolls out.
func strategy(ps *podsetv1alpha1.PodSet, p *podset.Preview) string {
	if ps.Spec.UpdateStrategy.Type == podsetv1alpha1.OnDeleteStrategyType {
		return "OnDelete: pods are updated only when deleted"
	}
	how := "in place where possible"
	if !podset.InPlacePolicy(ps) {
		how = "podUpdatePolicy Recreate"
	}
	s := fmt.Sprintf("RollingUpdate, %s, maxUnavailable %d", how, p.MaxUnavailable)
	if part := podset.Partition(ps); part > 0 {
		s += fmt.Sprintf(", partition %d", part)
	}
	return s
}

// detail says what changes on one pod, and why.
func detail(ps *podsetv1alpha1.PodSet, revs *podset.Revisions, c *podset.PodChange) string {
	tmpl := revs.Templates[revs.Update]
	switch c.Change {
	case podset.ChangeMetadata:
		return "nothing restarts"
	case podset.ChangeImage, podset.ChangeResize:
		parts := slices.Concat(imageChanges(c.Pod, tmpl), resourceChanges(c.Pod, tmpl))
		if c.Way.Restart() {
			parts = append(parts, "restarts "+strings.Join(c.Way.Restarts, ", "))
		} else {
			parts = append(parts, "no container restarts")
		}
		return strings.Join(parts, "; ")
	case podset.ChangeRecreate:
		if len(c.Fields) > 0 {
			return c.Why + ": " + strings.Join(c.Fields, ", ")
		}
		return c.Why
	case podset.ChangeHeldByPartition:
		if start := podset.Start(ps); start != 0 {
			return fmt.Sprintf("ordinal below %d (ordinals.start %d + partition %d): keeps its revision", podset.UpdateFrom(ps), start, podset.Partition(ps))
		}
		return fmt.Sprintf("ordinal below partition %d: keeps its revision", podset.Partition(ps))
	case podset.ChangeHeldOnDelete:
		return "takes the new revision when deleted"
	case podset.ChangeDelete:
		return fmt.Sprintf("ordinal at or above replicas %d", podset.Replicas(ps))
	case podset.ChangeConflict:
		return "the name is held by a pod this PodSet does not control: never touched"
	}
	return c.Why
}

// imageChanges lists the containers whose image the template changes:
// "app busybox:1.36 -> busybox:1.37".
func imageChanges(pod *corev1.Pod, tmpl *corev1.PodTemplateSpec) []string {
	var out []string
	for _, pair := range [][2][]corev1.Container{{pod.Spec.InitContainers, tmpl.Spec.InitContainers}, {pod.Spec.Containers, tmpl.Spec.Containers}} {
		for _, want := range pair[1] {
			if i := slices.IndexFunc(pair[0], func(c corev1.Container) bool { return c.Name == want.Name }); i >= 0 && pair[0][i].Image != want.Image {
				out = append(out, fmt.Sprintf("%s %s -> %s", want.Name, pair[0][i].Image, want.Image))
			}
		}
	}
	return out
}

// resourceChanges lists the cpu and memory the template changes on a
// pod's containers: "app requests.cpu 100m -> 200m".
func resourceChanges(pod *corev1.Pod, tmpl *corev1.PodTemplateSpec) []string {
	var out []string
	for _, pair := range [][2][]corev1.Container{{pod.Spec.InitContainers, tmpl.Spec.InitContainers}, {pod.Spec.Containers, tmpl.Spec.Containers}} {
		for _, want := range pair[1] {
			i := slices.IndexFunc(pair[0], func(c corev1.Container) bool { return c.Name == want.Name })
			if i < 0 {
				continue
			}
			got := pair[0][i].Resources
			for _, kind := range []struct {
				name      string
				got, want corev1.ResourceList
			}{{"requests", got.Requests, want.Resources.Requests}, {"limits", got.Limits, want.Resources.Limits}} {
				for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					g, hasG := kind.got[r]
					w, hasW := kind.want[r]
					if hasG == hasW && g.Equal(w) {
						continue
					}
					out = append(out, fmt.Sprintf("%s %s.%s %s -> %s", want.Name, kind.name, r, quantity(g, hasG), quantity(w, hasW)))
				}
			}
		}
	}
	return out
}

// quantity is a quantity as kubectl prints it, or "none".
func quantity(q resource.Quantity, ok bool) string {
	if !ok {
		return "none"
	}
	return q.String()
}

// previewJSON is what -o json prints.
type previewJSON struct {
	PodSet         string     `json:"podSet"`
	Namespace      string     `json:"namespace"`
	Exists         bool       `json:"exists"`
	FromRevision   string     `json:"fromRevision,omitempty"`
	ToRevision     string     `json:"toRevision"`
	MaxUnavailable int        `json:"maxUnavailable"`
	Pods           []podJSON  `json:"pods"`
	AtOnce         []string   `json:"atOnce"`
	Batches        [][]string `json:"batches"`
	Waiting        []string   `json:"waiting,omitempty"`
	// DrainHookSeconds is how long the pods' containers sleep in the
	// operator's preStop hook before SIGTERM, whoever stops them.
	DrainHookSeconds int64 `json:"drainHookSeconds"`
	// NotDrainedByOthers lists the pods made without that hook.
	NotDrainedByOthers []string `json:"notDrainedByOthers,omitempty"`
	Changed            bool     `json:"changed"`
}

// podJSON is one pod of previewJSON.
type podJSON struct {
	Name     string        `json:"name"`
	Revision string        `json:"revision,omitempty"`
	Ready    bool          `json:"ready"`
	Change   podset.Change `json:"change"`
	Detail   string        `json:"detail,omitempty"`
	Why      string        `json:"why,omitempty"`
	Fields   []string      `json:"fields,omitempty"`
	Restarts []string      `json:"restarts,omitempty"`
}

// printPreviewJSON prints the preview as one JSON object.
func printPreviewJSON(out io.Writer, ps, live *podsetv1alpha1.PodSet, revs *podset.Revisions, p *podset.Preview, changed bool) error {
	v := previewJSON{
		PodSet: ps.Name, Namespace: ps.Namespace, Exists: live != nil, ToRevision: podset.RevisionName(ps, revs.Update),
		MaxUnavailable: p.MaxUnavailable, AtOnce: p.AtOnce, Batches: p.Batches, Waiting: p.Waiting,
		DrainHookSeconds: podset.DrainHookSeconds(ps, &ps.Spec.Template), NotDrainedByOthers: p.NotDrainedByOthers,
		Changed: changed,
	}
	if live != nil {
		v.FromRevision = podset.RevisionName(live, podset.TemplateHash(live))
	}
	for i := range p.Pods {
		c := &p.Pods[i]
		pj := podJSON{Name: c.Name, Ready: c.Ready, Change: c.Change, Detail: detail(ps, revs, c), Why: c.Why, Fields: c.Fields, Restarts: c.Way.Restarts}
		if c.Pod != nil {
			pj.Revision = podset.RevisionName(ps, c.Hash)
		}
		v.Pods = append(v.Pods, pj)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", data)
	return err
}
