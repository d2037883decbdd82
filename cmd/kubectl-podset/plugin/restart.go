package plugin

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetac "github.com/podset-dev/podset-operator/applyconfig/apis/v1alpha1"
)

// RestartedAtAnnotation is the template annotation `kubectl rollout
// restart` sets on Deployments; the operator recreates pods when it changes.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

func newRestartCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "restart NAME",
		Short: "Restart every pod of a PodSet",
		Long: `Restart every pod of a PodSet, as 'kubectl rollout restart' does for a
Deployment: the template annotation kubectl.kubernetes.io/restartedAt is set
to now, with a server-side apply of that one field (field manager
kubectl-podset). The operator treats a new restartedAt as a change that
recreates pods, also under podUpdatePolicy InPlaceIfPossible (other
annotation changes are applied in place without a restart), and replaces
the pods as a rollout: maxUnavailable at a time, ordinals at or above
spec.ordinals.start + partition only.

A GitOps tool that applies the template does not own this annotation, so it
keeps it; a tool that replaces the whole object may remove it again, which
starts another rollout.`,
		Args: exactlyOneName,
		RunE: o.runOnPodSet(func(ctx context.Context, c client.WithWatch, ns, name string) error {
			now := time.Now().UTC().Format(time.RFC3339)
			ac := podsetac.PodSet(name, ns).WithSpec(podsetac.PodSetSpec().
				WithTemplate(corev1ac.PodTemplateSpec().WithAnnotations(map[string]string{RestartedAtAnnotation: now})))
			// The PodSet must exist: an apply would create one.
			if _, err := getPodSet(ctx, c, ns, name); err != nil {
				return err
			}
			if err := c.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return err
			}
			out := &printer{w: o.streams.Out}
			out.printf("podset.podset.dev/%s restarted (%s=%s); pods are recreated as a rollout\n", name, RestartedAtAnnotation, now)
			return out.err
		}),
	}
}
