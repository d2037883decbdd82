package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/podset-dev/podset-operator/controller"
)

// buildOperator builds the operator binary with the Dockerfile's flags.
func buildOperator(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the operator: %w\n%s", err, b)
	}
	return nil
}

// operatorProcess is podset-operator running as a subprocess, with the flags
// of a cluster deployment (config/manager) except leader election, metrics
// and probes, which the benchmark does not need.
type operatorProcess struct {
	cmd *exec.Cmd
	// exited is closed once the process has exited, with its exit status
	// in exitErr.
	exited  chan struct{}
	exitErr error
	// started is when it was started; workers is closed once its
	// controller has started its workers (its caches are synced, and it
	// leads when it elects a leader), at workersAt.
	started   time.Time
	workers   chan struct{}
	workersAt time.Time

	stopOnce sync.Once
	stopErr  error
}

// startOperator starts the binary on the given namespaces and returns once
// its controller has started its workers (its caches are synced). extra
// flags (bench.operatorFlags) come after the defaults, so they override
// them.
func startOperator(ctx context.Context, bin, kubeconfig, logFile string, namespaces []string, extra ...string) (*operatorProcess, error) {
	p, err := launchOperator(bin, kubeconfig, logFile, namespaces, extra...)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.workers:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("the operator exited before it started (log: %s): %v", logFile, p.exitErr)
	case <-time.After(60 * time.Second):
		_ = p.stop()
		return nil, fmt.Errorf("the operator did not start its workers within a minute (log: %s)", logFile)
	case <-ctx.Done():
		_ = p.stop()
		return nil, ctx.Err()
	}
}

// launchOperator starts the binary and returns at once; p.workers tells
// when its controller runs.
func launchOperator(bin, kubeconfig, logFile string, namespaces []string, extra ...string) (*operatorProcess, error) {
	cmd := exec.Command(bin,
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--log-format", "json",
		"--namespaces", strings.Join(namespaces, ","),
	)
	cmd.Args = append(cmd.Args, extra...)
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &operatorProcess{cmd: cmd, exited: make(chan struct{}), workers: make(chan struct{}), started: time.Now()}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(log, line) // the benchmark's own copy of the log: a failed write loses only that
			if strings.Contains(line, `"Starting workers"`) {
				once.Do(func() { p.workersAt = time.Now(); close(p.workers) })
			}
		}
		_ = log.Close()
	}()
	go func() {
		p.exitErr = cmd.Wait()
		_ = pw.Close() // ends the copy above; a pipe's writer closes without error
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM (the manager shuts down gracefully) and kills the
// process if it has not exited after 35 seconds. Only the first call
// stops it; later ones return its result.
func (p *operatorProcess) stop() error {
	if p == nil || p.cmd.Process == nil {
		return nil
	}
	p.stopOnce.Do(func() { p.stopErr = p.terminate() })
	return p.stopErr
}

func (p *operatorProcess) terminate() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		err := p.exitErr
		if st := p.cmd.ProcessState; st != nil {
			logf("podset-operator used %.2f s of CPU (user %.2f s, system %.2f s) from start to stop",
				(st.UserTime() + st.SystemTime()).Seconds(), st.UserTime().Seconds(), st.SystemTime().Seconds())
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) && !exit.Exited() {
			return nil // ended by the signal
		}
		return err
	case <-time.After(35 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("the operator did not stop within 35s of SIGTERM; killed")
	}
}

// inProcessOperator is the operator's manager built in this process by
// controller.NewManager, as main.go builds it, with the flags' defaults.
// Metrics and probe servers
// are off, and the manager skips the controller-name uniqueness check so
// that it can be built more than once per process. wrap, when set, wraps
// the manager's HTTP transport (the benchmark counts and timestamps
// requests with it).
type inProcessOperator struct {
	mgr    manager.Manager
	cancel context.CancelFunc
	// done is closed once the manager has returned.
	done chan struct{}
}

func startInProcess(ctx context.Context, c *cluster, namespaces []string, wrap func(http.RoundTripper) http.RoundTripper) (*inProcessOperator, error) {
	cfg := rest.CopyConfig(c.cfg)
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	mctx, cancel := context.WithCancel(context.Background())
	mgr, err := controller.NewManager(mctx, cfg, manager.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          false,
		GracefulShutdownTimeout: ptrTo(30 * time.Second),
		Controller:              crconfig.Controller{SkipNameValidation: ptrTo(true)},
	}, controller.Options{Namespaces: namespaces})
	if err != nil {
		cancel()
		return nil, err
	}
	o := &inProcessOperator{mgr: mgr, cancel: cancel, done: make(chan struct{})}
	go func() {
		// Its error is not read: stopped by cancel, it says nothing; failing
		// to start, the cache sync below fails.
		_ = mgr.Start(mctx)
		close(o.done)
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		o.stop()
		return nil, errors.New("the in-process operator's cache did not sync")
	}
	return o, nil
}

func (o *inProcessOperator) stop() {
	o.cancel()
	<-o.done
}

// startTutorial runs the tutorial controller in this process on the given
// namespaces.
func startTutorial(ctx context.Context, c *cluster, namespaces []string) (func(), error) {
	nsConfig := map[string]cache.Config{}
	for _, ns := range namespaces {
		nsConfig[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(c.cfg, manager.Options{
		Scheme:                 c.scheme,
		Cache:                  cache.Options{DefaultNamespaces: nsConfig},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: ptrTo(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := (&tutorialReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = mgr.Start(mctx) // as startInProcess's manager
		close(done)
	}()
	stop := func() { cancel(); <-done }
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		stop()
		return nil, errors.New("the tutorial's cache did not sync")
	}
	return stop, nil
}

// reconciles is how many passes a controller of this process has run.
func reconciles(name string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// logPath is a file for a component's log under the run's log folder.
func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }
