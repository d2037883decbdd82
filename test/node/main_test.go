//go:build node

// Package node is the real-node suite: PodSets on a real kubelet,
// containerd, runc, CNI bridge and kube-proxy (hack/node.sh) joined to a
// local kwok cluster, for what only they decide: the images a runtime
// reports, restarts and their counts, resizes, readiness probes, pods that
// keep their UID, IP and node, and traffic through a Service during
// rollouts. Run it with `make test-node` (root; it changes the host's
// network and cgroups while it runs and puts them back).
package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// suite is what TestMain sets up for every test.
var suite struct {
	root, kubectl, kubeconfig, plugin string
	client                            client.Client
	// images maps each test image reference to its manifest digest.
	images map[string]string
	// realNodes is how many real nodes hack/node.sh starts (REAL_NODES,
	// default 1): node 1 is nodeName, node 2 secondNodeName.
	realNodes int
	// operatorDir holds the operator that startOperator runs, and
	// stopOperator stops it with a signal, SIGTERM or SIGKILL (a test
	// that installs its own operator stops it for a while:
	// pauseSuiteOperator; TestFaultsMidRollout kills it).
	operatorDir  string
	stopOperator func(syscall.Signal)
}

// nodeName is the first real node's name, secondNodeName the second's
// (hack/node.sh; REAL_NODES=2).
const (
	nodeName       = "podset-node"
	secondNodeName = "podset-node-2"
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	var missing []string
	for _, v := range []string{"CONTROLPLANE", "KWOK_DIR", "CONTAINERD_DIR", "NODE_IMAGES"} {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "node: set %s; run the suite with `make test-node`\n", strings.Join(missing, ", "))
		return 2
	}
	suite.realNodes = 1
	if v := os.Getenv("REAL_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fail(fmt.Errorf("REAL_NODES=%q: want how many real nodes to start, at least 1", v))
		}
		suite.realNodes = n
	}
	var err error
	if suite.root, err = testenv.RepoRoot(); err != nil {
		return fail(err)
	}
	suite.kubectl = filepath.Join(os.Getenv("CONTROLPLANE"), "kubectl")
	images, err := os.ReadFile(filepath.Join(filepath.Dir(os.Getenv("NODE_IMAGES")), "images.json"))
	if err != nil {
		return fail(err)
	}
	if err := json.Unmarshal(images, &suite.images); err != nil {
		return fail(err)
	}

	// A node left by an interrupted run is taken down first.
	if _, err := nodeScript("down"); err != nil {
		return fail(err)
	}
	defer func() {
		if out, err := nodeScript("down"); err != nil {
			fmt.Fprintln(os.Stderr, "node: stopping the node:", err, out)
		}
	}()
	start := time.Now()
	out, err := nodeScript("up")
	if err != nil {
		return fail(err)
	}
	suite.kubeconfig = lastLine(out)
	fmt.Printf("node: %d real node(s) up in %v, kubeconfig %s\n", suite.realNodes, time.Since(start).Round(time.Millisecond), suite.kubeconfig)
	if suite.realNodes < 2 {
		fmt.Println("node: ONE real node: the tests that need two are SKIPPED (run make test-node REAL_NODES=2)")
	}
	if suite.client, err = testenv.NewClient(suite.kubeconfig); err != nil {
		return fail(err)
	}

	tmp, err := os.MkdirTemp("", "podset-node-")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	suite.operatorDir = tmp
	if suite.stopOperator, err = startOperator(tmp, false); err != nil {
		return fail(err)
	}
	defer func() { suite.stopOperator(syscall.SIGTERM) }()
	suite.plugin = filepath.Join(tmp, "kubectl-podset")
	if out, err := goCommand("build", "-o", suite.plugin, "./cmd/kubectl-podset"); err != nil {
		return fail(fmt.Errorf("building the kubectl plugin: %w\n%s", err, out))
	}
	return m.Run()
}

// nodeScript runs hack/node.sh with the suite's environment and returns
// its standard output; its standard error is in the error when it fails.
func nodeScript(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(suite.root, "hack", "node.sh"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/node.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.String(), nil
}

func goCommand(args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = suite.root
	return cmd.CombinedOutput()
}

// startOperator installs the CRD and the admission policies, builds the
// operator and runs it against the cluster, and returns what stops it: it
// sends a signal and waits for the operator to exit (after a SIGTERM, for
// 30 s at most, then kills it). Its log is bin/node/operator.log, started
// anew unless appendLog.
func startOperator(dir string, appendLog bool) (func(syscall.Signal), error) {
	for _, path := range []string{"config/crd/bases", "config/policy/hardening.yaml", "config/policy/pod-validity.yaml", "config/policy/replace.yaml"} {
		cmd := exec.Command(suite.kubectl, "--kubeconfig", suite.kubeconfig, "apply", "--server-side", "-f", filepath.Join(suite.root, path))
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("kubectl apply -f %s: %w\n%s", path, err, out)
		}
	}
	cmd := exec.Command(suite.kubectl, "--kubeconfig", suite.kubeconfig, "wait", "--for=condition=Established", "crd/podsets.podset.dev", "--timeout=60s")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("waiting for the CRD: %w\n%s", err, out)
	}
	bin := filepath.Join(dir, "podset-operator")
	if err := testenv.BuildOperator(context.Background(), suite.root, bin, false); err != nil {
		return nil, err
	}
	op, err := testenv.LaunchOperatorProcess(testenv.OperatorProcessOptions{
		Binary:     bin,
		Kubeconfig: suite.kubeconfig,
		LogFormat:  "console",
		LogLevel:   "debug",
		LogPath:    filepath.Join(suite.root, "bin", "node", "operator.log"),
		AppendLog:  appendLog,
	})
	if err != nil {
		return nil, err
	}
	fmt.Println("node: the operator runs, its log is", op.LogPath)
	// Its exit status after a signal says nothing.
	return func(sig syscall.Signal) { _ = op.Stop(sig) }, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// kubectl runs kubectl against the cluster and returns its output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), suite.kubectl, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitTimeout bounds every wait of the suite: a real kubelet starts a
// container in about a second; a deadline of progressDeadlineSeconds is
// the longest a test waits for.
const waitTimeout = 2 * time.Minute

// eventually calls check until it returns nil, or fails the test with its
// last error after waitTimeout.
var eventually = testenv.Waiter{Timeout: waitTimeout, Interval: 200 * time.Millisecond, Log: true}.Eventually

// execKubectl runs kubectl against the cluster.
func execKubectl(args ...string) (string, error) {
	out, err := exec.Command(suite.kubectl, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// runPlugin runs the kubectl plugin against the cluster.
func runPlugin(t *testing.T, args ...string) (string, error) {
	out, err := exec.CommandContext(t.Context(), suite.plugin, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}
