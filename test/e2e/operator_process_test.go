//go:build e2e

package e2e

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// operatorUser is the shipped service account: config/rbac grants it the
// operator's permissions, and the operator process impersonates it.
const operatorUser = "system:serviceaccount:" + operatorNamespace + ":" + operatorName

// stopGrace is how long stop waits for the operator to shut down after
// SIGTERM before it kills it.
const stopGrace = time.Minute

// operator is the operator binary running as a subprocess.
type operator struct{ *testenv.Process }

// startOperator starts the built operator against the suite's cluster,
// authenticated as the shipped service account, with leader election in
// podset-system and console logs to a file. It returns once the operator's
// readiness endpoint answers, and stops the operator when the test ends,
// printing its log if the test failed. extraArgs come last, so they override
// the flags above.
func startOperator(t *testing.T, extraArgs ...string) *operator {
	t.Helper()
	dir := t.TempDir()
	p, err := testenv.StartOperatorProcess(t.Context(), testenv.OperatorProcessOptions{
		Binary:                  suite.operator,
		Kubeconfig:              impersonatingKubeconfig(t, dir),
		LeaderElection:          true,
		LeaderElectionNamespace: operatorNamespace,
		MetricsAddress:          "127.0.0.1:0",
		LogFormat:               "console",
		Args:                    extraArgs,
		Ready:                   testenv.ReadyOnProbe,
		LogPath:                 filepath.Join(dir, "operator.log"),
		ReadyTimeout:            waitTimeout,
		StopGrace:               stopGrace,
	})
	if err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	op := &operator{p}
	t.Logf("operator started, PID %d, log %s", p.Cmd.Process.Pid, p.LogPath)
	t.Cleanup(func() {
		_ = op.stop(t) // the tests that expect an exit status check it themselves
		if t.Failed() {
			t.Logf("operator log:\n%s", op.log(t))
		}
	})
	return op
}

// stop sends the operator SIGTERM, waits until it exits (killing it after
// stopGrace, which fails the test) and returns its exit status. Only the
// first call signals.
func (op *operator) stop(t *testing.T) error {
	t.Helper()
	err := op.Stop(syscall.SIGTERM)
	if errors.Is(err, testenv.ErrKilled) {
		t.Errorf("the operator: %v", err)
	}
	return err
}

// log is everything the operator has printed so far.
func (op *operator) log(t *testing.T) string {
	t.Helper()
	log, err := op.Log()
	if err != nil {
		t.Errorf("reading the operator log: %v", err)
	}
	return log
}

// impersonatingKubeconfig writes into dir a copy of the suite's admin
// kubeconfig whose users impersonate the shipped service account, checks
// that the API server sees its requests as that account's, and returns its
// path.
func impersonatingKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range cfg.AuthInfos {
		user.Impersonate = operatorUser
	}
	path := filepath.Join(dir, "operator.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}

	c, err := testenv.NewClient(path)
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(t.Context(), review); err != nil {
		t.Fatalf("asking the API server who %s is: %v", path, err)
	}
	if got := review.Status.UserInfo.Username; got != operatorUser {
		t.Fatalf("the API server sees the operator's kubeconfig as %q, want %q", got, operatorUser)
	}
	t.Logf("the operator authenticates as %s, groups %v", operatorUser, review.Status.UserInfo.Groups)
	return path
}
