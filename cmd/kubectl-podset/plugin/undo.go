package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

func newUndoCommand(o *options) *cobra.Command {
	var toRevision int64
	cmd := &cobra.Command{
		Use:   "undo NAME",
		Short: "Roll a PodSet back to an earlier revision",
		Long: `Roll a PodSet back to the template of an earlier revision (default: the
one before the current), as 'kubectl rollout undo' does for a StatefulSet.

The template is written with an update of the PodSet (field manager
kubectl-podset, with the resource version read, so a concurrent change
fails instead of being lost), not a server-side apply: an apply can only
remove fields its own manager owns, so fields that another manager (a
GitOps tool) set in the newer template would survive the rollback. When
another manager owns spec.template (Argo CD's argocd-controller, Flux's
kustomize-controller, kubectl), undo says so: that tool will put its
template back on its next sync unless its source (Git) changes too.`,
		Args: exactlyOneName,
		RunE: o.runOnPodSet(func(ctx context.Context, c client.WithWatch, ns, name string) error {
			ps, revs, err := podSetAndRevisions(ctx, c, ns, name)
			if err != nil {
				return err
			}
			target, err := undoTarget(ps, revs, toRevision)
			if err != nil {
				return err
			}
			out, errOut := &printer{w: o.streams.Out}, &printer{w: o.streams.ErrOut}
			tmpl, serviceName := podset.RevisionSpec(&target.template)
			if equality.Semantic.DeepEqual(tmpl, ps.Spec.Template) && serviceName == ps.Spec.ServiceName {
				out.printf("podset.podset.dev/%s skipped rollback (current template already matches revision %d)\n", ps.Name, target.number)
				return out.err
			}
			others := templateManagers(ps.ManagedFields)
			// A revision's subdomain is the serviceName its pods were
			// made with: the rollback gives both back.
			ps.Spec.Template, ps.Spec.ServiceName = tmpl, serviceName
			if err := c.Update(ctx, ps, client.FieldOwner(FieldManager)); err != nil {
				return err
			}
			out.printf("podset.podset.dev/%s rolled back to revision %d (%s); spec.template written by field manager %s\n",
				ps.Name, target.number, target.name, FieldManager)
			if len(others) > 0 {
				errOut.printf("Warning: spec.template is also managed by %s; if that is a GitOps tool (Argo CD, Flux), "+
					"it will revert this rollback on its next sync unless the template in Git changes too\n", strings.Join(others, ", "))
			}
			return cmp.Or(out.err, errOut.err)
		}),
	}
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "The revision to rollback to. Default to 0 (last revision).")
	return cmd
}

// undoTarget picks the revision to roll back to: the one numbered
// toRevision, or by default the newest one older than the current
// template's (status.updateRevision, or the newest revision).
func undoTarget(ps *podsetv1alpha1.PodSet, revs []revision, toRevision int64) (revision, error) {
	if toRevision != 0 {
		i := slices.IndexFunc(revs, func(r revision) bool { return r.number == toRevision })
		if i < 0 {
			return revision{}, fmt.Errorf("unable to find specified revision %d in history", toRevision)
		}
		return revs[i], nil
	}
	if len(revs) == 0 {
		return revision{}, fmt.Errorf("no rollout history found for podset %q", ps.Name)
	}
	current := revs[len(revs)-1].number
	if i := slices.IndexFunc(revs, func(r revision) bool { return r.name == ps.Status.UpdateRevision }); i >= 0 {
		current = revs[i].number
	}
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].number < current {
			return revs[i], nil
		}
	}
	return revision{}, fmt.Errorf("no previous revision of podset %q to roll back to", ps.Name)
}

// templateManagers lists the field managers other than the plugin that own
// fields under spec.template.
func templateManagers(entries []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Manager == FieldManager || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		spec, _ := fields["f:spec"].(map[string]any)
		if _, ok := spec["f:template"]; ok && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	return out
}
