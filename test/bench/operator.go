package main

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
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
	"github.com/podset-dev/podset-operator/test/testenv"
)

// operatorProcess is podset-operator running as a subprocess
// (testenv.Process), with the flags of a cluster deployment
// (config/manager) except leader election, metrics and probes, which the
// benchmark does not need. It is ready once its controller has started its
// workers (its caches are synced, and it leads when it elects a leader).
type operatorProcess struct {
	*testenv.Process
	logCPU sync.Once
}

// startOperator starts the binary on the given namespaces and returns once
// its controller has started its workers. extra flags
// (bench.operatorFlags) come after the defaults, so they override them.
func startOperator(ctx context.Context, bin, kubeconfig, logFile string, namespaces []string, extra ...string) (*operatorProcess, error) {
	return asOperator(testenv.StartOperatorProcess(ctx, operatorOptions(bin, kubeconfig, logFile, namespaces, extra)))
}

// launchOperator starts the binary and returns at once; Ready tells when
// its controller runs.
func launchOperator(bin, kubeconfig, logFile string, namespaces []string, extra ...string) (*operatorProcess, error) {
	return asOperator(testenv.LaunchOperatorProcess(operatorOptions(bin, kubeconfig, logFile, namespaces, extra)))
}

func asOperator(p *testenv.Process, err error) (*operatorProcess, error) {
	if err != nil {
		return nil, err
	}
	return &operatorProcess{Process: p}, nil
}

// operatorOptions are the benchmark's operator: JSON logs appended to
// logFile, ready once its workers start (the start the restart scenario
// times), and 35 seconds to stop, past the manager's 30 s of graceful
// shutdown.
func operatorOptions(bin, kubeconfig, logFile string, namespaces, extra []string) testenv.OperatorProcessOptions {
	return testenv.OperatorProcessOptions{
		Binary:       bin,
		Kubeconfig:   kubeconfig,
		Namespaces:   namespaces,
		LogFormat:    "json",
		Args:         extra,
		Ready:        testenv.ReadyOnWorkers,
		LogPath:      logFile,
		AppendLog:    true,
		ReadyTimeout: time.Minute,
		StopGrace:    35 * time.Second,
	}
}

// stop sends SIGTERM (the manager shuts down gracefully), kills the
// process if it has not exited after 35 seconds, and logs the CPU it
// used. Only the first call stops it; later ones return its result.
func (p *operatorProcess) stop() error {
	if p == nil {
		return nil
	}
	err := p.Stop(syscall.SIGTERM)
	if st := p.Cmd.ProcessState; st != nil {
		p.logCPU.Do(func() {
			logf("podset-operator used %.2f s of CPU (user %.2f s, system %.2f s) from start to stop",
				(st.UserTime() + st.SystemTime()).Seconds(), st.UserTime().Seconds(), st.SystemTime().Seconds())
		})
	}
	if testenv.EndedBySignal(err) {
		return nil
	}
	return err
}

// startInProcess starts the operator's manager in this process
// (testenv.StartOperatorInProcess), with the flags' defaults, on
// namespaces, and returns once its cache has synced. wrap, when set,
// wraps the manager's HTTP transport (the benchmark counts and
// timestamps requests with it). Stop's error is not read: stopped by its
// cancel, it says nothing; failing to start, the cache sync fails.
func startInProcess(ctx context.Context, c *cluster, namespaces []string, wrap func(http.RoundTripper) http.RoundTripper) (*testenv.Operator, error) {
	cfg := rest.CopyConfig(c.cfg)
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	o, err := testenv.StartOperatorInProcess(cfg, manager.Options{GracefulShutdownTimeout: ptrTo(30 * time.Second)}, controller.Options{Namespaces: namespaces})
	if err != nil {
		return nil, err
	}
	if !o.Synced(ctx) {
		_ = o.Stop()
		return nil, errors.New("the in-process operator's cache did not sync")
	}
	return o, nil
}

// startTutorial runs the tutorial controller in this process on the given
// namespaces; the returned func stops it.
func startTutorial(ctx context.Context, c *cluster, namespaces []string) (func() error, error) {
	mgr, err := ctrl.NewManager(c.cfg, manager.Options{
		Scheme:                 c.scheme,
		Cache:                  cache.Options{DefaultNamespaces: namespaceCaches(namespaces)},
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
	stop := func() error { cancel(); <-done; return nil }
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		_ = stop()
		return nil, errors.New("the tutorial's cache did not sync")
	}
	return stop, nil
}

// reconciles is how many passes a controller of this process has run.
func reconciles(name string) float64 {
	m, err := testenv.GatherMetrics(metrics.Registry)
	if err != nil {
		return 0
	}
	return m.SumBy("controller_runtime_reconcile_total", "controller")[name]
}

// logPath is a file for a component's log under the run's log folder.
func logPath(dir, name string) string { return filepath.Join(dir, name+".log") }
