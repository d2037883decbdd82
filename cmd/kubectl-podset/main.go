// Command kubectl-podset is the kubectl plugin for PodSets: `kubectl podset
// rollout status|restart|history|undo|preview`. Install it with
//
//	go install github.com/podset-dev/podset-operator/cmd/kubectl-podset@latest
//
// or from the krew manifest in plugins/podset.yaml.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/podset-dev/podset-operator/cmd/kubectl-podset/plugin"
)

func main() {
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	os.Exit(plugin.ExitCode(cmd.Execute()))
}
