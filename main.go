// Command podset-operator runs the PodSet controller: it keeps each PodSet's
// pods, <name>-<start> to <name>-<start+replicas-1> (start is
// spec.ordinals.start, 0 unless set), running from its template.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/podset-dev/podset-operator/controller"
)

// version is the release this binary was built from, stamped in by the
// Makefile and the Dockerfile with -ldflags "-X main.version=vX.Y.Z". An
// unstamped build reports the module version `go install` recorded, or
// "dev".
var version = ""

// binaryVersion is what --version prints and the startup log shows.
func binaryVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

// options are the command-line flags.
type options struct {
	namespaces              string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	metricsAddr             string
	metricsCertPath         string
	metricsCertName         string
	metricsCertKey          string
	enableHTTP2             bool
	probeAddr               string
	pprofAddr               string
	maxConcurrentReconciles int
	workers                 int
	logLevel                string
	logFormat               string
}

func main() {
	var o options
	// --kubeconfig is registered by controller-runtime: a kubeconfig path,
	// else $KUBECONFIG, the in-cluster config, or ~/.kube/config.
	flag.StringVar(&o.namespaces, "namespaces", "", "Comma-separated namespaces to watch. Empty: all namespaces.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one of several replicas reconciles.")
	flag.StringVar(&o.leaderElectionID, "leader-election-id", "podset-operator.podset.dev", "Name of the leader election Lease.")
	flag.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease. Empty: the operator's own namespace.")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint, served over HTTPS to authenticated and authorized clients only. \"0\" turns it off.")
	flag.StringVar(&o.metricsCertPath, "metrics-cert-path", "", "Directory of the metrics endpoint's serving certificate (reloaded when it changes). Empty: a self-signed certificate generated at start.")
	flag.StringVar(&o.metricsCertName, "metrics-cert-name", "tls.crt", "File name of the metrics serving certificate in --metrics-cert-path.")
	flag.StringVar(&o.metricsCertKey, "metrics-cert-key", "tls.key", "File name of the metrics serving key in --metrics-cert-path.")
	flag.BoolVar(&o.enableHTTP2, "enable-http2", false, "Serve metrics over HTTP/2 too. Off by default: HTTP/1.1 only, against the HTTP/2 Stream Cancellation and Rapid Reset CVEs.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints. \"0\" turns them off.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of the Go profiler's /debug/pprof endpoints, unauthenticated: bind it to 127.0.0.1 or a port no one else reaches. \"0\" (the default) turns it off.")
	flag.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "How many PodSets are reconciled at once.")
	flag.IntVar(&o.workers, "pod-write-workers", controller.DefaultWorkers, "How many pod writes one reconcile sends at once.")
	flag.StringVar(&o.logLevel, "log-level", "info", "Log level: debug, info or error.")
	flag.StringVar(&o.logFormat, "log-format", "json", "Log format: json (for clusters) or console (for humans).")
	printVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *printVersion {
		fmt.Println("podset-operator", binaryVersion())
		return
	}

	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		fmt.Fprintln(os.Stderr, "podset-operator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	logger, err := newLogger(o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	var namespaces []string
	for ns := range strings.SplitSeq(o.namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces = append(namespaces, ns)
		}
	}

	metrics, certWatcher, err := metricsOptions(o)
	if err != nil {
		return err
	}
	mgr, err := controller.NewManager(ctx, cfg, manager.Options{
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptrTo(30 * time.Second),
	}, controller.Options{
		Namespaces:              namespaces,
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		Workers:                 o.workers,
	})
	if err != nil {
		return err
	}
	if certWatcher != nil {
		// The watcher re-reads the mounted certificate when it changes (a
		// renewal by cert-manager), so the operator never needs a restart.
		if err := mgr.Add(certWatcher); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "version", binaryVersion(), "namespaces", namespaces, "leaderElection", o.leaderElect)
	return mgr.Start(ctx)
}

// metricsOptions serves metrics over HTTPS to authenticated and authorized
// callers only, as the kubebuilder v4 scaffold does: HTTP/1.1 unless
// --enable-http2, and the certificate in --metrics-cert-path when one is
// mounted (else controller-runtime's self-signed one, which scrapers cannot
// verify). The returned watcher, when not nil, must run with the manager.
func metricsOptions(o options) (metricsserver.Options, *certwatcher.CertWatcher, error) {
	opts := metricsserver.Options{
		BindAddress:    o.metricsAddr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
	if !o.enableHTTP2 {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if o.metricsCertPath == "" {
		return opts, nil, nil
	}
	w, err := certwatcher.New(filepath.Join(o.metricsCertPath, o.metricsCertName), filepath.Join(o.metricsCertPath, o.metricsCertKey))
	if err != nil {
		return opts, nil, fmt.Errorf("loading the metrics certificate: %w", err)
	}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.GetCertificate })
	return opts, w, nil
}

// newLogger builds a zap logger: JSON for log collectors in a cluster,
// console for a person at a terminal.
func newLogger(level, format string) (logr.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return logr.Logger{}, fmt.Errorf("--log-level: %w", err)
	}
	var cfg zap.Config
	switch format {
	case "json":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	default:
		return logr.Logger{}, fmt.Errorf("--log-format must be json or console, not %q", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.DisableStacktrace = lvl > zapcore.DebugLevel
	z, err := cfg.Build()
	if err != nil {
		return logr.Logger{}, err
	}
	return zapr.NewLogger(z), nil
}

func ptrTo[T any](v T) *T { return &v }
