//go:build gitops

package gitops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/internal/localcluster"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// clusterName is the kwok cluster of this suite: "podset-gitops", or
// $GITOPS_CLUSTER_NAME so that two runs on one machine do not share one.
var clusterName = cmp.Or(os.Getenv("GITOPS_CLUSTER_NAME"), "podset-gitops")

// suite is what TestMain sets up for every test.
var suite struct {
	// root is the repository root; kubectl the path of kubectl.
	root, kubectl string
	// kubeconfig is the cluster's admin kubeconfig, auditLog the
	// kube-apiserver's audit log.
	kubeconfig, auditLog string
	// client is a cluster-admin client that reads straight from the API
	// server, with the core and PodSet types registered.
	client client.Client
	// source serves the revisions' tarballs.
	source *artifactServer
}

// TestMain builds the operator, starts the cluster with an audit log,
// installs the PodSet CRD and Flux's, starts the operator and the
// kustomize-controller, runs the tests and deletes the cluster, also when
// they fail.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run is TestMain's body, so that deferred cleanups run before os.Exit.
func run(m *testing.M) int {
	env, err := readEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gitops:", err)
		return 2
	}
	code, err := setUp(env, m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gitops:", err)
		return 1
	}
	return code
}

// setUp starts everything the tests need, runs them and stops it all again.
func setUp(env suiteEnv, m *testing.M) (int, error) {
	var err error
	if suite.root, err = testenv.RepoRoot(); err != nil {
		return 0, err
	}
	suite.kubectl = filepath.Join(env.controlPlane, "kubectl")
	tmp, err := os.MkdirTemp("", "podset-gitops-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	ctx := context.Background()
	operator := filepath.Join(tmp, "podset-operator")
	if err := testenv.BuildOperator(ctx, suite.root, operator, false); err != nil {
		return 0, err
	}

	policy := filepath.Join(tmp, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return 0, err
	}
	cluster := localCluster(env, policy)
	// A cluster left over by an interrupted run is deleted first.
	if err := cluster.Down(ctx); err != nil {
		return 0, fmt.Errorf("deleting a leftover cluster: %w", err)
	}
	defer func() {
		if err := cluster.Down(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "gitops: deleting the cluster:", err)
		}
	}()
	if suite.kubeconfig, err = cluster.Up(ctx); err != nil {
		return 0, fmt.Errorf("starting the cluster: %w", err)
	}
	// kwokctl keeps a cluster's logs beside its kubeconfig, in
	// clusters/<name>/logs.
	suite.auditLog = filepath.Join(filepath.Dir(suite.kubeconfig), "clusters", clusterName, "logs", "audit.log")
	if _, err := os.Stat(suite.auditLog); err != nil {
		return 0, fmt.Errorf("the kube-apiserver writes no audit log: %w", err)
	}
	fmt.Printf("gitops: cluster %s is up, kubeconfig %s, audit log %s\n", clusterName, suite.kubeconfig, suite.auditLog)
	// The suite's client logs nothing; the controllers log to their files.
	ctrl.SetLogger(logr.Discard())
	if suite.client, err = testenv.NewClient(suite.kubeconfig); err != nil {
		return 0, err
	}

	crds := []string{filepath.Join(suite.root, "config", "crd", "bases"), filepath.Join(env.fluxDir, "crds.yaml")}
	if err := kubectl("apply", "--server-side", "-f", crds[0], "-f", crds[1]); err != nil {
		return 0, err
	}
	// kubectl wait fails on a CRD that has no status yet, so it is tried
	// again.
	err = testenv.Poll(context.Background(), time.Minute, time.Second, func(context.Context) error {
		return kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")
	})
	if err != nil {
		return 0, err
	}

	if suite.source, err = newArtifactServer(filepath.Join(tmp, "artifacts")); err != nil {
		return 0, err
	}
	defer suite.source.Close()

	op, err := testenv.StartOperatorProcess(ctx, testenv.OperatorProcessOptions{
		Binary:     operator,
		Kubeconfig: suite.kubeconfig,
		LogFormat:  "console",
		Ready:      testenv.ReadyOnProbe,
		LogPath:    filepath.Join(tmp, "operator.log"),
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = op.Stop(syscall.SIGTERM) }() // how it ended is not the suite's question

	health, err := freeAddress()
	if err != nil {
		return 0, err
	}
	flux, err := testenv.StartProcess(ctx, testenv.ProcessOptions{
		Env: []string{
			"KUBECONFIG=" + suite.kubeconfig,
			// The namespace the controller would run in; with
			// --watch-all-namespaces it only names its leader
			// election Lease, which is off.
			"RUNTIME_NAMESPACE=flux-system",
			// It builds each revision in a temporary directory.
			"TMPDIR=" + tmp,
		},
		Path: filepath.Join(env.fluxDir, "kustomize-controller"),
		Args: []string{
			"--watch-all-namespaces=true",
			"--enable-leader-election=false",
			"--metrics-addr", "0",
			"--health-addr", health,
			// No notification-controller: events go to the API server only.
			"--events-addr", "",
			"--log-encoding", "console",
		},
		LogPath:  filepath.Join(tmp, "kustomize-controller.log"),
		ReadyURL: "http://" + health + "/readyz",
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = flux.Stop(syscall.SIGTERM) }()
	fmt.Printf("gitops: the operator (PID %d) and kustomize-controller (PID %d) run; logs in %s\n", op.Cmd.Process.Pid, flux.Cmd.Process.Pid, tmp)

	code := m.Run()
	if code != 0 {
		for _, p := range []*testenv.Process{op, flux} {
			fmt.Printf("--- %s, last lines:\n%s\n", p.LogPath, p.Tail(80))
		}
	}
	return code, nil
}

// suiteEnv holds the environment variables the suite needs.
type suiteEnv struct {
	controlPlane, kwokDir, fluxDir string
}

// readEnv reads CONTROLPLANE, KWOK_DIR and FLUX_DIR, and checks that the
// binaries the suite runs are there.
func readEnv() (suiteEnv, error) {
	env := suiteEnv{
		controlPlane: os.Getenv("CONTROLPLANE"),
		kwokDir:      os.Getenv("KWOK_DIR"),
		fluxDir:      os.Getenv("FLUX_DIR"),
	}
	if env.controlPlane == "" || env.kwokDir == "" || env.fluxDir == "" {
		return env, errors.New("set CONTROLPLANE, KWOK_DIR and FLUX_DIR (bin/flux-<version>, with kustomize-controller and crds.yaml): `make test-gitops` builds them and sets them")
	}
	for _, bin := range []string{
		filepath.Join(env.controlPlane, "kubectl"),
		filepath.Join(env.kwokDir, "kwokctl"),
		filepath.Join(env.fluxDir, "kustomize-controller"),
		filepath.Join(env.fluxDir, "crds.yaml"),
	} {
		if _, err := os.Stat(bin); err != nil {
			return env, fmt.Errorf("a file the suite needs is missing: %w", err)
		}
	}
	return env, nil
}

// localCluster is the suite's kwok cluster: one node, and kube-apiserver's
// audit log written with the policy at auditPolicy.
func localCluster(env suiteEnv, auditPolicy string) localcluster.Cluster {
	return localcluster.Cluster{
		Name:         clusterName,
		Root:         suite.root,
		ControlPlane: env.controlPlane,
		Kwok:         env.kwokDir,
		Nodes:        1,
		AuditPolicy:  auditPolicy,
	}
}

// kubectl runs kubectl with the suite's kubeconfig.
func kubectl(args ...string) error {
	cmd := exec.Command(suite.kubectl, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// freeAddress is a free 127.0.0.1:port.
func freeAddress() (string, error) {
	port, err := testenv.FreePort()
	return fmt.Sprintf("127.0.0.1:%d", port), err
}
