package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// errStalled is returned when the PodSet reports Stalled=True.
var errStalled = errors.New("stalled")

func newStatusCommand(o *options) *cobra.Command {
	var (
		watchFlag bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show the status of a PodSet's rollout, and wait for it to finish",
		Long: `Show the status of a PodSet's rollout, the way 'kubectl rollout status' does
for a StatefulSet. By default it watches the PodSet until the rollout is
complete. It exits non-zero when the PodSet is Stalled (for example
ProgressDeadlineExceeded: no progress for spec.progressDeadlineSeconds),
quoting the condition's message, or when --timeout passes.`,
		Args: exactlyOneName,
		RunE: o.runOnPodSet(func(ctx context.Context, c client.WithWatch, ns, name string) error {
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return rolloutStatus(ctx, c, ns, name, watchFlag, o.streams.Out)
		}),
	}
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", true, "Watch the status of the rollout until it's done.")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "The length of time to wait before ending watch, zero means never. Any other values should contain a corresponding time unit (e.g. 1s, 2m, 3h).")
	return cmd
}

// rolloutStatus prints the rollout's state, and with watch waits for it to
// complete, printing each new state once.
func rolloutStatus(ctx context.Context, c client.WithWatch, ns, name string, watchFlag bool, out interface{ Write([]byte) (int, error) }) error {
	ps, err := getPodSet(ctx, c, ns, name)
	if err != nil {
		return err
	}
	p, last := &printer{w: out}, ""
	report := func(ps *podsetv1alpha1.PodSet) (bool, error) {
		msg, done, err := statusMessage(ps)
		if err != nil {
			return false, err
		}
		if msg != last {
			p.printf("%s", msg)
			last = msg
		}
		return done, p.err
	}
	done, err := report(ps)
	if err != nil || done || !watchFlag {
		return err
	}
	rv := ps.ResourceVersion
	for {
		list := &podsetv1alpha1.PodSetList{}
		list.ResourceVersion = rv
		w, err := c.Watch(ctx, list, client.InNamespace(ns),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)},
			&client.ListOptions{Raw: nil})
		if err != nil {
			return timeoutOr(ctx, err)
		}
		done, err = follow(ctx, w, report)
		w.Stop()
		if err != nil || done {
			return err
		}
		// The watch ended (the server closes watches now and then, or the
		// resource version is too old): read again and watch from there.
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ps); err != nil {
			return timeoutOr(ctx, err)
		}
		if done, err = report(ps); err != nil || done {
			return err
		}
		rv = ps.ResourceVersion
	}
}

// follow reports every change a watch delivers until the rollout is done,
// fails, or the watch ends. When the watch ends, the caller reads the
// PodSet again and watches from there.
func follow(ctx context.Context, w watch.Interface, report func(*podsetv1alpha1.PodSet) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, timeoutOr(ctx, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return false, errors.New("the PodSet was deleted while waiting for its rollout")
			case watch.Error:
				return false, nil
			}
			ps, ok := ev.Object.(*podsetv1alpha1.PodSet)
			if !ok {
				continue
			}
			if done, err := report(ps); err != nil || done {
				return done, err
			}
		}
	}
}

// timeoutOr turns the context's deadline into kubectl's timeout message.
func timeoutOr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.New("timed out waiting for the condition")
	}
	return err
}

// statusMessage says where a PodSet's rollout is, as kubectl's
// StatefulSetStatusViewer does, from the PodSet's status alone: done is true
// once the rollout is complete; a Stalled PodSet is an error that quotes
// the condition.
func statusMessage(ps *podsetv1alpha1.PodSet) (msg string, done bool, err error) {
	st := ps.Status
	if st.ObservedGeneration == 0 || ps.Generation > st.ObservedGeneration {
		return "Waiting for podset spec update to be observed...\n", false, nil
	}
	if c := meta.FindStatusCondition(st.Conditions, podsetv1alpha1.StalledCondition); c != nil && c.Status == "True" {
		return "", false, fmt.Errorf("podset %q rollout %w (%s): %s", ps.Name, errStalled, c.Reason, c.Message)
	}
	desired := int32(1)
	if ps.Spec.Replicas != nil {
		desired = *ps.Spec.Replicas
	}
	if st.ReadyReplicas < desired {
		return fmt.Sprintf("Waiting for %d pods to be ready...\n", desired-st.ReadyReplicas), false, nil
	}
	if st.AvailableReplicas < desired {
		return fmt.Sprintf("Waiting for %d pods to be available...\n", desired-st.AvailableReplicas), false, nil
	}
	if c := meta.FindStatusCondition(st.Conditions, podsetv1alpha1.ReadyCondition); c != nil && c.Reason == podsetv1alpha1.PausedReason {
		// As kubectl waits on a paused Deployment: until it is resumed
		// and rolled out.
		return fmt.Sprintf("Waiting for the rollout to be resumed: podset %q is paused with %d of %d pods updated...\n",
			ps.Name, st.UpdatedReplicas, desired), false, nil
	}
	strategy := ps.Spec.UpdateStrategy
	if strategy.Type == podsetv1alpha1.OnDeleteStrategyType {
		return fmt.Sprintf("roll out complete (OnDelete): %d of %d pods run revision %s; delete the others to update them...\n",
			st.UpdatedReplicas, desired, st.UpdateRevision), true, nil
	}
	if p := partitionOf(ps); p > 0 {
		if want := max(desired-p, 0); st.UpdatedReplicas < want {
			return fmt.Sprintf("Waiting for partitioned roll out to finish: %d out of %d new pods have been updated...\n",
				st.UpdatedReplicas, want), false, nil
		}
		return fmt.Sprintf("partitioned roll out complete: %d new pods have been updated...\n", st.UpdatedReplicas), true, nil
	}
	if st.UpdateRevision != st.CurrentRevision || st.UpdatedReplicas < desired {
		return fmt.Sprintf("waiting for podset rolling update to complete %d pods at revision %s...\n",
			st.UpdatedReplicas, st.UpdateRevision), false, nil
	}
	return fmt.Sprintf("roll out complete: %d pods at revision %s...\n", st.UpdatedReplicas, st.UpdateRevision), true, nil
}

// partitionOf is spec.updateStrategy.rollingUpdate.partition, 0 when unset.
func partitionOf(ps *podsetv1alpha1.PodSet) int32 {
	s := ps.Spec.UpdateStrategy
	if s.RollingUpdate == nil || s.RollingUpdate.Partition == nil {
		return 0
	}
	return *s.RollingUpdate.Partition
}
