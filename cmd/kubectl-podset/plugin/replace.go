package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
)

// errNotReplaceable is returned for a pod the operator would not replace.
var errNotReplaceable = errors.New("cannot be replaced")

func newReplaceCommand(o *options) *cobra.Command {
	var podSetName string
	cmd := &cobra.Command{
		Use:   "replace POD",
		Short: "Replace one pod of a PodSet: drained, deleted and made again under its name",
		Long: `Replace one pod of a PodSet, off a bad node or out of a stuck state: the
label podset.dev/replace=true is set on the pod (a server-side apply of that
one label, field manager kubectl-podset, with the pod's UID, so it never
lands on a pod made since). The operator then drains the pod (its containers
sleep in their preStop hook while it leaves its Services, or its readiness
gate is closed first), deletes it within the rollout's maxUnavailable (a
pod that is not Ready at once), and makes it again under its name, on
whichever node the scheduler picks: cordon the node first to move it off.
The new pod runs the revision a deleted pod is made from (below the
partition or while paused, the one it ran).

A pod no PodSet controls, a pod of another PodSet than --podset names, and
a pod outside the PodSet's ordinals (a surplus pod, deleted anyway) are
refused. Asking again for a pod already being replaced changes nothing.
Without the plugin: kubectl label pod POD podset.dev/replace=true.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("expected exactly one pod name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			return o.replacePod(cmd.Context(), c, ns, args[0], podSetName)
		},
	}
	cmd.Flags().StringVar(&podSetName, "podset", "", "The PodSet the pod must belong to; refuse the pod otherwise.")
	return cmd
}

// replacePod asks the operator to replace the pod ns/name, after checking
// that it is one of a PodSet's pods (of want, when set).
func (o *options) replacePod(ctx context.Context, c client.Client, ns, name, want string) error {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return err
	}
	ps, err := owningPodSet(ctx, c, pod)
	if err != nil {
		return err
	}
	if want != "" && ps.Name != want {
		return fmt.Errorf("pod %s %w: it belongs to podset %s, not %s", name, errNotReplaceable, ps.Name, want)
	}
	if ordinal, ok := podset.PodOrdinal(ps.Name, pod.Name); !ok || !podset.Wanted(ps, ordinal) {
		return fmt.Errorf("pod %s %w: it is not one of podset %s's pods (%s-%d to %s-%d); it is deleted as surplus",
			name, errNotReplaceable, ps.Name, ps.Name, podset.Start(ps), ps.Name, podset.Start(ps)+int(podset.Replicas(ps))-1)
	}
	out := &printer{w: o.streams.Out}
	switch {
	case pod.DeletionTimestamp != nil:
		out.printf("pod/%s is already being replaced (terminating)\n", name)
		return out.err
	case podset.ReplaceRequested(pod):
		out.printf("pod/%s is already being replaced (%s=true)\n", name, podsetv1alpha1.ReplaceLabel)
		return out.err
	}
	ac := corev1ac.Pod(name, ns).WithUID(pod.UID).WithLabels(map[string]string{podsetv1alpha1.ReplaceLabel: "true"})
	if err := c.Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("labelling pod %s: %w", name, err)
	}
	out.printf("pod/%s replacement requested (%s=true): podset %s drains it, deletes it within maxUnavailable and makes it again\n",
		name, podsetv1alpha1.ReplaceLabel, ps.Name)
	return out.err
}

// owningPodSet is the PodSet that controls the pod, or an error saying
// what controls it instead.
func owningPodSet(ctx context.Context, c client.Client, pod *corev1.Pod) (*podsetv1alpha1.PodSet, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil, fmt.Errorf("pod %s %w: no PodSet controls it (it has no controller)", pod.Name, errNotReplaceable)
	}
	if ref.Kind != "PodSet" || ref.APIVersion != podsetv1alpha1.GroupVersion.String() {
		return nil, fmt.Errorf("pod %s %w: it is controlled by %s %s, not by a PodSet", pod.Name, errNotReplaceable, ref.Kind, ref.Name)
	}
	ps, err := getPodSet(ctx, c, pod.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	if ps.UID != ref.UID {
		return nil, fmt.Errorf("pod %s %w: it is controlled by an earlier podset %s (UID %s), which is gone", pod.Name, errNotReplaceable, ref.Name, ref.UID)
	}
	return ps, nil
}
