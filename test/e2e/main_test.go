//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/internal/localcluster"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// clusterName is the kwok cluster of this suite: "podset-e2e", or
// $E2E_CLUSTER_NAME so that two runs on one machine do not share a cluster.
// `make run` uses "podset", which the suite leaves alone.
var clusterName = cmp.Or(os.Getenv("E2E_CLUSTER_NAME"), "podset-e2e")

// suite is what TestMain sets up for every test.
var suite struct {
	// root is the repository root.
	root string
	// kubectl and kustomize are the paths of those binaries.
	kubectl, kustomize string
	// operator is the operator binary built for this run.
	operator string
	// helm is the path of the helm binary.
	helm string
	// env is what the suite read from its environment.
	env suiteEnv
	// cluster is the name of the kwok cluster the tests run on, and
	// kubeconfig its admin kubeconfig.
	cluster, kubeconfig string
	// client is a cluster-admin client that reads straight from the API
	// server, with the core and PodSet types registered.
	client client.Client
}

// TestMain builds the operator, starts the cluster, runs the tests and
// deletes the cluster, also when the tests fail.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run is TestMain's body, so that deferred cleanups run before os.Exit.
func run(m *testing.M) int {
	env, err := readEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	if suite.root, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	suite.kubectl = filepath.Join(env.controlPlane, "kubectl")
	suite.kustomize = env.kustomize
	suite.helm = env.helm
	suite.env = env

	tmp, err := os.MkdirTemp("", "podset-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if suite.operator, err = buildOperator(suite.root, tmp); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Println("e2e: the operator is a static ELF binary (no PT_INTERP, no shared libraries) and reports version", e2eVersion)

	// A cluster left over by an interrupted run (a test timeout kills the
	// process before any cleanup) is deleted first, so every run starts from
	// scratch.
	cluster := localCluster(env, clusterName)
	ctx := context.Background()
	if err := cluster.Down(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: deleting a leftover cluster:", err)
		return 1
	}
	defer func() {
		if err := cluster.Down(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: deleting the cluster:", err)
		}
	}()
	kubeconfig, err := cluster.Up(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the cluster:", err)
		return 1
	}
	suite.cluster, suite.kubeconfig = clusterName, kubeconfig
	fmt.Printf("e2e: cluster %s is up, kubeconfig %s\n", clusterName, suite.kubeconfig)
	if suite.client, err = testenv.NewClient(suite.kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// suiteEnv holds the environment variables the suite needs.
type suiteEnv struct {
	controlPlane, kwokDir, kustomize, helm string
}

// readEnv reads CONTROLPLANE, KWOK_DIR, KUSTOMIZE and HELM, and checks that the
// binaries the suite runs are there.
func readEnv() (suiteEnv, error) {
	env := suiteEnv{
		controlPlane: os.Getenv("CONTROLPLANE"),
		kwokDir:      os.Getenv("KWOK_DIR"),
		kustomize:    os.Getenv("KUSTOMIZE"),
		helm:         os.Getenv("HELM"),
	}
	var missing []string
	for _, v := range []struct{ name, value string }{
		{"CONTROLPLANE", env.controlPlane},
		{"KWOK_DIR", env.kwokDir},
		{"KUSTOMIZE", env.kustomize},
		{"HELM", env.helm},
	} {
		if v.value == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return env, fmt.Errorf("set %s. From the repository root, with the binaries the Makefile builds under bin/\n"+
			"(`make controlplane`; kustomize comes with `make verify`, helm with `make test-e2e`):\n\n"+
			"\tCONTROLPLANE=$PWD/bin/controlplane/k8s-<version>_etcd-<version>  # kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubectl\n"+
			"\tKWOK_DIR=$PWD/bin/kwok-<version>                                  # kwok, kwokctl\n"+
			"\tKUSTOMIZE=$PWD/bin/kustomize-<version>/kustomize\n"+
			"\tHELM=$PWD/bin/helm-<version>/helm\n\n"+
			"\tgo test -tags e2e ./test/e2e/ -count=1 -v",
			strings.Join(missing, ", "))
	}
	for _, bin := range []string{
		filepath.Join(env.controlPlane, "kubectl"),
		filepath.Join(env.controlPlane, "kube-apiserver"),
		filepath.Join(env.kwokDir, "kwokctl"),
		env.kustomize,
		env.helm,
	} {
		if _, err := os.Stat(bin); err != nil {
			return env, fmt.Errorf("a binary the suite needs is missing: %w", err)
		}
	}
	return env, nil
}

// e2eVersion is the version the suite stamps into the operator it builds.
const e2eVersion = "v0.0.0-e2e"

// buildOperator builds the operator into dir with the Dockerfile's own
// build command (its `RUN CGO_ENABLED=0 go build` line, with VERSION set to
// e2eVersion and the output moved into dir), checks that the result is a
// static binary, as the distroless static image requires, and that it
// reports the stamped version. It returns the binary's path.
func buildOperator(root, dir string) (string, error) {
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return "", err
	}
	const prefix, out = "RUN CGO_ENABLED=0 go build ", "/out/podset-operator"
	var command string
	for line := range strings.Lines(string(dockerfile)) {
		if strings.HasPrefix(line, prefix) {
			command = strings.TrimSpace(strings.TrimPrefix(line, "RUN "))
		}
	}
	if command == "" || !strings.Contains(command, out) {
		return "", fmt.Errorf("the Dockerfile has no %q line writing %s", prefix+"...", out)
	}
	bin := filepath.Join(dir, "podset-operator")
	command = strings.ReplaceAll(command, out, bin)
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION="+e2eVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", command, err, out)
	}
	fmt.Println("e2e: built the operator with the Dockerfile's command:", command)
	if err := checkStatic(bin); err != nil {
		return "", err
	}
	got, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	if want := "podset-operator " + e2eVersion + "\n"; string(got) != want {
		return "", fmt.Errorf("%s --version printed %q, want %q", bin, got, want)
	}
	return bin, nil
}

// checkStatic fails when the ELF file at path asks for a dynamic loader (a
// PT_INTERP program header) or names shared libraries.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is not static: it has a PT_INTERP program header", path)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s is not static: it needs %v", path, libs)
	}
	return nil
}

// localCluster is the suite's kwok cluster called name, with two nodes.
func localCluster(env suiteEnv, name string) localcluster.Cluster {
	return localcluster.Cluster{
		Name:         name,
		Root:         suite.root,
		ControlPlane: env.controlPlane,
		Kwok:         env.kwokDir,
		Nodes:        2,
		// A node whose heartbeat stops is lost within about 20 seconds
		// (TestLostNodeReplacementOnKwok), not kwokctl's default 200.
		HeartbeatFactor: 0.5,
	}
}
