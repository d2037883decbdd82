package plugin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// ChangeCauseAnnotation is the annotation kubectl's history shows as
// CHANGE-CAUSE; on a PodSet revision it is read from the template.
const ChangeCauseAnnotation = "kubernetes.io/change-cause"

// revision is one ControllerRevision of a PodSet and the template it holds.
type revision struct {
	number   int64
	name     string
	template corev1.PodTemplateSpec
}

// podSetAndRevisions reads the PodSet ns/name and its revisions.
func podSetAndRevisions(ctx context.Context, c client.Client, ns, name string) (*podsetv1alpha1.PodSet, []revision, error) {
	ps, err := getPodSet(ctx, c, ns, name)
	if err != nil {
		return nil, nil, err
	}
	revs, err := revisions(ctx, c, ps)
	if err != nil {
		return nil, nil, err
	}
	return ps, revs, nil
}

// revisions reads a PodSet's revisions as the operator writes them:
// ControllerRevisions labelled with the PodSet's name, controlled by it,
// holding a template (podset.RevisionTemplate); oldest first.
func revisions(ctx context.Context, c client.Client, ps *podsetv1alpha1.PodSet) ([]revision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(ps.Namespace), client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name}); err != nil {
		return nil, err
	}
	var revs []revision
	for i := range list.Items {
		cr := &list.Items[i]
		if !metav1.IsControlledBy(cr, ps) {
			continue
		}
		tmpl, err := podset.RevisionTemplate(cr)
		if err != nil {
			return nil, err
		}
		revs = append(revs, revision{number: cr.Revision, name: cr.Name, template: *tmpl})
	}
	slices.SortFunc(revs, func(a, b revision) int { return int(a.number - b.number) })
	return revs, nil
}

// images lists a template's container images, init containers first.
func images(t *corev1.PodTemplateSpec) string {
	var out []string
	for _, c := range append(slices.Clone(t.Spec.InitContainers), t.Spec.Containers...) {
		out = append(out, c.Image)
	}
	return strings.Join(out, ",")
}

func newHistoryCommand(o *options) *cobra.Command {
	var number int64
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List a PodSet's revisions (its ControllerRevisions)",
		Long: `List the revisions of a PodSet, as 'kubectl rollout history' does for a
StatefulSet: the revision number, the ControllerRevision, the template's
kubernetes.io/change-cause annotation and the images. With --revision, print
that revision's pod template.`,
		Args: exactlyOneName,
		RunE: o.runOnPodSet(func(ctx context.Context, c client.WithWatch, ns, name string) error {
			ps, revs, err := podSetAndRevisions(ctx, c, ns, name)
			if err != nil {
				return err
			}
			out := &printer{w: o.streams.Out}
			if number != 0 {
				i := slices.IndexFunc(revs, func(r revision) bool { return r.number == number })
				if i < 0 {
					return fmt.Errorf("unable to find the specified revision %d", number)
				}
				out.printf("podset.podset.dev/%s with revision #%d (%s)\n", ps.Name, number, revs[i].name)
				if out.err != nil {
					return out.err
				}
				tpl := &corev1.PodTemplate{Template: revs[i].template}
				tpl.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodTemplate"))
				tpl.Name = revs[i].name
				return (&printers.YAMLPrinter{}).PrintObj(tpl, o.streams.Out)
			}
			out.printf("podset.podset.dev/%s\n", ps.Name)
			rows := [][]string{{"REVISION", "NAME", "CHANGE-CAUSE", "IMAGES"}}
			for _, r := range revs {
				cause := r.template.Annotations[ChangeCauseAnnotation]
				if cause == "" {
					cause = "<none>"
				}
				current := ""
				if r.name == ps.Status.UpdateRevision {
					current = " (current)"
				}
				rows = append(rows, []string{strconv.FormatInt(r.number, 10), r.name + current, cause, images(&r.template)})
			}
			out.table(rows)
			return out.err
		}),
	}
	cmd.Flags().Int64Var(&number, "revision", 0, "See the details, including the pod template, of the revision specified")
	return cmd
}
