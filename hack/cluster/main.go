// Command cluster starts, stops and locates a local kwok cluster (package
// internal/localcluster) for `make run`, `make cluster-up`,
// `make cluster-down` and hack/node.sh. Run it from the repository root:
//
//	go run ./hack/cluster -controlplane DIR -kwok DIR [-name podset] [-nodes 3] [-heartbeat-factor F] up
//	go run ./hack/cluster -kwok DIR [-name podset] down
//	go run ./hack/cluster [-name podset] kubeconfig
//
// up prints the kubeconfig's path on standard output, its progress on
// standard error, and keeps the output of kwokctl and kubectl in
// .logs/cluster.log; kubeconfig prints the path without starting
// anything.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/podset-dev/podset-operator/internal/localcluster"
)

func main() {
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	c := localcluster.Cluster{Root: root, Log: os.Stderr}
	flag.StringVar(&c.Name, "name", localcluster.DefaultName, "the cluster's name")
	flag.StringVar(&c.ControlPlane, "controlplane", "", "folder of kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kubectl (up)")
	flag.StringVar(&c.Kwok, "kwok", "", "folder of kwok and kwokctl (up, down)")
	flag.IntVar(&c.Nodes, "nodes", 3, "fake nodes to keep, 110 pods each (up)")
	flag.Float64Var(&c.HeartbeatFactor, "heartbeat-factor", 0,
		"kwokctl's heartbeatFactor, 0 for its default (5): 0.5 loses a node whose heartbeat stops within about 20 seconds, not 200 (up)")
	flag.Usage = func() {
		_, _ = fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./hack/cluster [flags] up|down|kubeconfig")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	// Ctrl-C reaches kwokctl and kubectl too (one process group): they
	// stop their own way, not killed by a canceled context.
	ctx := context.Background()
	need := map[string][]string{"up": {"controlplane", "kwok"}, "down": {"kwok"}}[flag.Arg(0)]
	for _, name := range need {
		if flag.Lookup(name).Value.String() == "" {
			fmt.Fprintf(os.Stderr, "cluster: %s needs -%s (make sets it)\n", flag.Arg(0), name)
			os.Exit(2)
		}
	}
	switch flag.Arg(0) {
	case "up":
		// kwokctl's and kubectl's own output goes to a log file: the
		// terminal shows what the project says, as `make test` does.
		var toolLog *os.File
		if toolLog, err = openToolLog(root); err != nil {
			break
		}
		defer func() { _ = toolLog.Close() }() // a log file: its last lines are already written
		c.ToolLog = toolLog
		fmt.Fprintf(os.Stderr, "Starting the local cluster %q (kwokctl's output: %s)...\n", c.Name, toolLogPath)
		var kubeconfig string
		if kubeconfig, err = c.Up(ctx); err == nil {
			fmt.Println(kubeconfig)
		}
	case "down":
		err = c.Down(ctx)
	case "kubeconfig":
		fmt.Println(c.Kubeconfig())
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// toolLogPath is where up keeps the output of kwokctl and kubectl, from
// the repository root; .logs/ holds the logs of `make test` too.
const toolLogPath = ".logs/cluster.log"

// openToolLog opens the tools' log under root for appending, making its
// folder.
func openToolLog(root string) (*os.File, error) {
	path := filepath.Join(root, toolLogPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
}
