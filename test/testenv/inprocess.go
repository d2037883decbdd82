package testenv

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/podset-dev/podset-operator/controller"
)

// Operator is the operator's manager run in this process, built by
// controller.NewManager as main.go builds it: for the suites and the
// benchmark that wrap its transport, fail its requests or read its cache.
// StartOperatorProcess runs the built binary instead.
type Operator struct {
	Manager manager.Manager
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
}

// StartOperatorInProcess builds the operator's manager on cfg and starts
// it in the background. Unless opts say otherwise its metrics and probe
// servers are off and it skips controller-runtime's check that controller
// names are unique, so that a process can run several. It returns at
// once; Synced waits for its cache.
func StartOperatorInProcess(cfg *rest.Config, opts manager.Options, o controller.Options) (*Operator, error) {
	if opts.Metrics.BindAddress == "" {
		opts.Metrics.BindAddress = "0"
	}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	if opts.Controller.SkipNameValidation == nil {
		opts.Controller.SkipNameValidation = ptr.To(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := controller.NewManager(ctx, cfg, opts, o)
	if err != nil {
		cancel()
		return nil, err
	}
	op := &Operator{Manager: mgr, cancel: cancel, done: make(chan struct{})}
	go func() {
		op.err = mgr.Start(ctx)
		close(op.done)
	}()
	return op, nil
}

// Synced waits until the operator's cache has synced, and reports whether
// it did before ctx ended.
func (op *Operator) Synced(ctx context.Context) bool {
	return op.Manager.GetCache().WaitForCacheSync(ctx)
}

// Stop stops the manager (a leader keeps its lease until it expires, as
// after a crash, unless opts.LeaderElectionReleaseOnCancel), waits for it and returns what its Start returned. Later
// calls return at once.
func (op *Operator) Stop() error {
	op.cancel()
	<-op.done
	return op.err
}
