//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
type operator struct {
	cmd     *exec.Cmd
	logPath string
	// exited is closed once the process has exited; waitErr is then its
	// exit status.
	exited  chan struct{}
	waitErr error
	stopped sync.Once
}

// startOperator starts the built operator against the suite's cluster,
// authenticated as the shipped service account, with leader election in
// podset-system and console logs to a file. It returns once the operator's
// readiness endpoint answers, and stops the operator when the test ends,
// printing its log if the test failed. extraArgs come last, so they override
// the flags above.
func startOperator(t *testing.T, extraArgs ...string) *operator {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := impersonatingKubeconfig(t, dir)
	probeAddr := testenv.FreeAddress(t)
	op := &operator{logPath: filepath.Join(dir, "operator.log"), exited: make(chan struct{})}
	logFile, err := os.Create(op.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor

	op.cmd = exec.Command(suite.operator, append([]string{
		"--kubeconfig", kubeconfig,
		"--leader-elect",
		"--leader-election-namespace", operatorNamespace,
		"--metrics-bind-address", "127.0.0.1:0",
		"--health-probe-bind-address", probeAddr,
		"--log-format", "console",
	}, extraArgs...)...)
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	// Should the test binary die without its cleanups (a test timeout),
	// the kernel kills the operator with it.
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := op.cmd.Start(); err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	t.Logf("operator started, PID %d, log %s", op.cmd.Process.Pid, op.logPath)
	go func() {
		op.waitErr = op.cmd.Wait()
		close(op.exited)
	}()
	t.Cleanup(func() {
		_ = op.stop(t) // the tests that expect an exit status check it themselves
		if t.Failed() {
			t.Logf("operator log:\n%s", op.log(t))
		}
	})

	eventually(t, "the operator answers on /readyz", func(ctx context.Context) error {
		select {
		case <-op.exited:
			return fmt.Errorf("the operator exited: %v", op.waitErr)
		default:
		}
		return testenv.HTTPOK(ctx, "http://"+probeAddr+"/readyz")
	})
	return op
}

// stop sends the operator SIGTERM, waits until it exits (killing it after
// stopGrace) and returns its exit status. Only the first call signals.
func (op *operator) stop(t *testing.T) error {
	t.Helper()
	op.stopped.Do(func() {
		select {
		case <-op.exited:
			return
		default:
		}
		if err := op.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Logf("sending SIGTERM to the operator (PID %d): %v", op.cmd.Process.Pid, err)
		}
		select {
		case <-op.exited:
		case <-time.After(stopGrace):
			t.Errorf("the operator (PID %d) did not exit within %v of SIGTERM; killing it", op.cmd.Process.Pid, stopGrace)
			_ = op.cmd.Process.Kill()
			<-op.exited
		}
	})
	<-op.exited
	return op.waitErr
}

// log is everything the operator has printed so far.
func (op *operator) log(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(op.logPath)
	if err != nil {
		t.Errorf("reading the operator log: %v", err)
	}
	return string(data)
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
