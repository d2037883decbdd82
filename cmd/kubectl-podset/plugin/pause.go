package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetac "github.com/podset-dev/podset-operator/applyconfig/apis/v1alpha1"
)

func newPauseCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "pause NAME",
		Short: "Pause the rollout of a PodSet",
		Long: `Pause the rollout of a PodSet, as 'kubectl rollout pause' does for a
Deployment: spec.paused is set to true, with a server-side apply of that one
field (field manager kubectl-podset). While paused, template changes update
no pod; scaling, the repair of deleted or failed pods and lost-node
replacement go on, each new pod on the revision its pods run. Resume with
'kubectl podset rollout resume'.

A GitOps tool whose manifest sets spec.paused owns it: its next sync
(Flux every interval, Argo CD with selfHeal) puts its own value back, so
pause in Git instead. A manifest that leaves spec.paused out keeps the
plugin's value.`,
		Args: exactlyOneName,
		RunE: o.runOnPodSet(func(ctx context.Context, c client.WithWatch, ns, name string) error {
			return o.setPaused(ctx, c, ns, name, true)
		}),
	}
}

func newResumeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume the paused rollout of a PodSet",
		Long: `Resume the paused rollout of a PodSet, as 'kubectl rollout resume' does for
a Deployment: spec.paused is set to false, with a server-side apply of that
one field (field manager kubectl-podset). The operator then rolls out the
pending template as any rollout: maxUnavailable at a time, drained.`,
		Args: exactlyOneName,
		RunE: o.runOnPodSet(func(ctx context.Context, c client.WithWatch, ns, name string) error {
			return o.setPaused(ctx, c, ns, name, false)
		}),
	}
}

// setPaused applies spec.paused and says what changed, as kubectl does
// ("paused", or "already paused" when it was).
func (o *options) setPaused(ctx context.Context, c client.WithWatch, ns, name string, paused bool) error {
	// The PodSet must exist: an apply would create one.
	ps, err := getPodSet(ctx, c, ns, name)
	if err != nil {
		return err
	}
	verb := map[bool]string{true: "paused", false: "resumed"}[paused]
	out := &printer{w: o.streams.Out}
	if ps.Spec.Paused == paused {
		out.printf("podset.podset.dev/%s already %s\n", name, verb)
		return out.err
	}
	ac := podsetac.PodSet(name, ns).WithSpec(podsetac.PodSetSpec().WithPaused(paused))
	if err := c.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("setting spec.paused of podset %s: %w", name, err)
	}
	out.printf("podset.podset.dev/%s %s\n", name, verb)
	return out.err
}
