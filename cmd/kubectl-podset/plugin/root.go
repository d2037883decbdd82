package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// FieldManager is the field manager of every write the plugin makes, so
// that managedFields show who restarted or rolled back a PodSet.
const FieldManager = "kubectl-podset"

// version is the release the binary was built from; `make plugin` and
// `make release` stamp it.
var version = "dev"

// options are what every command needs: where the cluster is, and where to
// write.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	// newClient is replaced by tests; by default it builds a client from
	// the kubeconfig flags.
	newClient func() (client.WithWatch, error)
}

// client returns a client and the namespace the flags name (or the
// kubeconfig context's).
func (o *options) client() (client.WithWatch, string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	if o.newClient != nil {
		c, err := o.newClient()
		return c, ns, err
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := podsetv1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	return c, ns, err
}

// NewCommand returns `kubectl podset` with its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newCommand(streams, nil)
}

func newCommand(streams genericiooptions.IOStreams, newClient func() (client.WithWatch, error)) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams, newClient: newClient}
	root := &cobra.Command{
		Use:           "kubectl-podset",
		Short:         "Operate PodSets (podset.dev/v1alpha1) the way kubectl operates built-in workloads",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl podset"},
	}
	o.flags.AddFlags(root.PersistentFlags())
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)

	rollout := &cobra.Command{
		Use:   "rollout SUBCOMMAND",
		Short: "Manage the rollout of a PodSet",
	}
	rollout.AddCommand(newStatusCommand(o), newRestartCommand(o), newHistoryCommand(o), newUndoCommand(o), newPreviewCommand(o),
		newPauseCommand(o), newResumeCommand(o))
	root.AddCommand(rollout, newReplaceCommand(o))
	wrapErrors(root, streams)
	return root
}

// wrapErrors makes every command print its error as kubectl does
// ("error: ...") before returning it for the exit code.
func wrapErrors(cmd *cobra.Command, streams genericiooptions.IOStreams) {
	for _, c := range cmd.Commands() {
		wrapErrors(c, streams)
	}
	if cmd.RunE == nil {
		return
	}
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		err := run(c, args)
		if err != nil && !errors.Is(err, errChanges) {
			// The exit code reports err whether or not this line gets
			// out; if standard error itself fails, there is nowhere left
			// to say so.
			_, _ = fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
		}
		return err
	}
}

// runOnPodSet is the RunE of a command on the one PodSet its argument names:
// run gets the command's context, the client, the namespace and the name.
func (o *options) runOnPodSet(run func(ctx context.Context, c client.WithWatch, ns, name string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, ns, err := o.client()
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, ns, args[0])
	}
}

// getPodSet reads the PodSet ns/name.
func getPodSet(ctx context.Context, c client.Client, ns, name string) (*podsetv1alpha1.PodSet, error) {
	ps := &podsetv1alpha1.PodSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// exactlyOneName is cobra's argument check with kubectl's message.
func exactlyOneName(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("expected exactly one PodSet name, got %d arguments", len(args))
	}
	return nil
}
