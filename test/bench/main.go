package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/kruise"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// config is one run's settings: main fills it from the flags.
type config struct {
	size sizes
	// out is a file the table is also written to; plots the folder of the
	// SVG plots (default: the run's log folder).
	out, plots  string
	keepCluster bool
	// trace runs the operator with --log-level debug and prints one
	// PodSet's pass timeline after each convergence (trace.go).
	trace bool
	// profileDir is where kube-apiserver's CPU profiles go; empty takes
	// none (profile.go).
	profileDir string
	// podSetPolicy is the podUpdatePolicy of the benchmark's PodSets:
	// empty for the default, InPlaceIfPossible (pods.go).
	podSetPolicy podsetv1alpha1.PodUpdatePolicy
	// scaleK x scaleN is the scale scenario's shape.
	scaleK, scaleN int32
	// operatorArgs are extra flags for the operator subprocess.
	operatorArgs []string
	// contenders and phases are what -contenders and -only select; empty
	// selects all (but the scale scenario, which runs only when named).
	contenders, phases map[string]bool
	// kruiseDir is KRUISE_DIR: the kruise contender takes part when set.
	kruiseDir string
}

// runs reports whether the contender of this kind ("limit", "podset") takes
// part.
func (c *config) runs(kind string) bool { return len(c.contenders) == 0 || c.contenders[kind] }

// phase reports whether the scenario of this phase runs.
func (c *config) phase(name string) bool { return len(c.phases) == 0 || c.phases[name] }

// operatorFlags are the operator subprocess's flags after its defaults:
// -operator-flags, then extra.
func (c *config) operatorFlags(extra ...string) []string {
	return append(slices.Clone(c.operatorArgs), extra...)
}

// parseConfig reads the flags.
func parseConfig() (config, error) {
	size := flag.String("size", "full", "tiny (every scenario at a tiny size, about two minutes) or full")
	cfg := config{}
	flag.StringVar(&cfg.out, "out", "", "also write the table to this file")
	flag.BoolVar(&cfg.trace, "trace", false, "run the operator with --log-level debug and print one PodSet's pass timeline after each convergence")
	policy := flag.String("podset-policy", "", "podUpdatePolicy of the benchmark's PodSets: empty (the default, InPlaceIfPossible) or Recreate; the pods carry the operator's readiness gate either way")
	flag.StringVar(&cfg.plots, "plots", "", "write the SVG plots of pods Ready over time into this folder (default: the run's log folder)")
	flag.BoolVar(&cfg.keepCluster, "keep-cluster", false, "keep the podset-bench cluster at the end even if this run created it")
	onlyPhases := flag.String("only", "", "run only these phases, comma-separated (conv, rollout, inplace, reaction, memory; scale, which only runs when named here)")
	scaleFlag := flag.String("scale", "", "the scale phase's K PodSets (and ReplicaSets, StatefulSets) x N pods (default: 1000x10 at the full size, 10x5 at the tiny one)")
	convFlag := flag.String("conv", "", "replace the convergence scenarios, e.g. 100x10,1x1000 (the scale-down follows a first 1xN): a debugging aid")
	operatorFlags := flag.String("operator-flags", "", "extra flags for the operator subprocess, e.g. \"--max-concurrent-reconciles=16\": a debugging aid")
	flag.StringVar(&cfg.profileDir, "profile", "", "write kube-apiserver's CPU profile of every timed scenario into this folder: a folder per scenario and contender, of 3 s slices that go tool pprof reads as one")
	who := flag.String("contenders", "", "run only these contenders, comma-separated (limit, gated-limit (in-place only), podset, replicaset, statefulset, kruise with KRUISE_DIR, tutorial): a debugging aid")
	flag.Parse()

	cfg.contenders, cfg.phases = set(*who), set(*onlyPhases)
	cfg.kruiseDir = kruise.Dir()
	if cfg.contenders["kruise"] && cfg.kruiseDir == "" {
		return cfg, fmt.Errorf("the kruise contender needs KRUISE_DIR, the folder make kruise builds (make bench sets it)")
	}
	switch *size {
	case "full":
		cfg.size = full
	case "tiny":
		cfg.size = tiny
	default:
		return cfg, fmt.Errorf("-size must be tiny or full")
	}
	if *convFlag != "" {
		cfg.size.conv = nil
		for _, kn := range strings.Split(*convFlag, ",") {
			var k, n int32
			if _, err := fmt.Sscanf(strings.TrimSpace(kn), "%dx%d", &k, &n); err != nil || k < 1 || n < 1 {
				return cfg, fmt.Errorf("-conv takes KxN,KxN,... (e.g. 100x10,1x1000), not %q", *convFlag)
			}
			cfg.size.conv = append(cfg.size.conv, [2]int32{k, n})
		}
	}
	cfg.scaleK, cfg.scaleN = cfg.size.scale[0], cfg.size.scale[1]
	if *scaleFlag != "" {
		if _, err := fmt.Sscanf(*scaleFlag, "%dx%d", &cfg.scaleK, &cfg.scaleN); err != nil || cfg.scaleK < 1 || cfg.scaleN < 1 {
			return cfg, fmt.Errorf("-scale takes KxN")
		}
	}
	cfg.podSetPolicy = podsetv1alpha1.PodUpdatePolicy(*policy)
	cfg.operatorArgs = strings.Fields(*operatorFlags)
	return cfg, nil
}

// set is a comma-separated list as a set.
func set(list string) map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			m[s] = true
		}
	}
	return m
}

func main() {
	cfg, err := parseConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	code := run(ctx, cfg)
	cancel()
	os.Exit(code)
}

// scenario is one part of a run: it runs the contenders that can do its
// step and returns what it measured, which renders its own rows of the
// table. A new scenario is a file with its type, its run and its result,
// and a line in scenarios.
type scenario interface {
	// phase is its name for -only.
	phase() string
	run(ctx context.Context, b *bench) result
}

// result is what a scenario measured.
type result interface {
	// rows are its rows of the table.
	rows(b *bench) []row
}

// scenarios are the run's scenarios, in the order they run and in which
// the table shows them.
func (c *config) scenarios() []scenario {
	var out []scenario
	seen := map[[2]int32]int{}
	for i, kn := range c.size.conv {
		out = append(out, &convergence{k: kn[0], n: kn[1], first: i == 0, again: seen[kn]})
		seen[kn]++
	}
	out = append(out, rollout{}, inPlace{}, reaction{}, memory{})
	if c.phases["scale"] {
		out = append(out, scaleUp{k: c.scaleK, n: c.scaleN})
	}
	return out
}

// contenders are the contenders of the timed scenarios, in the order they
// run, as -contenders selects them; each scenario runs those that can do
// its step. The gated limit is the in-place scenario's own
// (inPlaceContenders).
func (b *bench) contenders() []contender {
	var xs []contender
	for _, w := range b.size.workers {
		xs = append(xs, &applyLimit{&limitContender{b: b, w: w}})
	}
	for _, w := range b.size.workers {
		xs = append(xs, &limitContender{b: b, w: w, creates: true})
	}
	xs = append(xs, &podSetContender{b: b}, &replicaSetContender{kcm{b}}, &statefulSetContender{kcm{b}})
	if b.kruiseDir != "" {
		xs = append(xs, &kruiseContender{b: b})
	}
	xs = append(xs, &tutorialContender{b: b})
	return slices.DeleteFunc(xs, func(x contender) bool { return !b.runs(contenderKind(x.name())) })
}

func run(ctx context.Context, cfg config) int {
	began := time.Now()
	b, stop, err := start(ctx, cfg)
	defer stop()
	if err != nil {
		logf("%v", err)
		return 1
	}
	var results []result
	for _, s := range cfg.scenarios() {
		if ctx.Err() != nil {
			break
		}
		if cfg.phase(s.phase()) {
			results = append(results, s.run(ctx, b))
		}
	}
	switch {
	case ctx.Err() != nil:
		b.fail("interrupted: %v", ctx.Err())
	case b.deleteCluster:
		// The cluster goes, and its namespaces with it.
	default:
		if err := b.c.deleteNamespaces(ctx, b.leftover...); err != nil {
			b.fail("deleting the run's namespaces: %v", err)
		}
	}
	b.report(results)
	logf("wall time %s", time.Since(began).Round(time.Second))
	if len(b.failures) > 0 {
		sort.Strings(b.failures)
		logf("%d failures:", len(b.failures))
		for _, f := range b.failures {
			logf("  %s", f)
		}
		return 1
	}
	return 0
}

// start starts or reuses the cluster, takes its lease, installs the CRD
// and builds the operator meanwhile. stop releases the lease and deletes
// the cluster if this run made it (and -keep-cluster is not set); it is
// never nil.
func start(ctx context.Context, cfg config) (b *bench, stop func(), err error) {
	var undo []func()
	stop = func() {
		for _, f := range slices.Backward(undo) {
			f()
		}
	}
	c, err := newCluster()
	if err != nil {
		return nil, stop, err
	}
	logDir := filepath.Join(c.root, "bin", "bench", "logs", c.runID)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, stop, err
	}
	if err := setLogger(logPath(logDir, "in-process")); err != nil {
		return nil, stop, err
	}
	logf("size %s, run %s, logs in %s", cfg.size.name, c.runID, logDir)
	b = &bench{config: cfg, c: c, logDir: logDir, operatorBin: filepath.Join(c.root, "bin", "bench", "podset-operator")}

	// The operator builds while the cluster starts.
	logf("building %s", b.operatorBin)
	built := make(chan error, 1)
	go func() { built <- testenv.BuildOperator(ctx, c.root, b.operatorBin, true) }()
	err = func() error {
		logf("starting or reusing the %s cluster with %d nodes", clusterName, cfg.size.nodes)
		if err := c.up(ctx, cfg.size.nodes); err != nil {
			return err
		}
		b.deleteCluster = !c.existed && !cfg.keepCluster
		undo = append(undo, func() {
			if !b.deleteCluster {
				logf("leaving the %s cluster running (%s)", clusterName, c.kubeconfig)
				return
			}
			logf("deleting the %s cluster", clusterName)
			if err := c.down(context.Background()); err != nil {
				logf("%v", err)
			}
		})
		release, inherited, err := c.lock(ctx)
		if err != nil {
			return err
		}
		if inherited && !cfg.keepCluster {
			b.deleteCluster = true
		}
		undo = append(undo, func() {
			if release(b.deleteCluster) {
				b.deleteCluster = false
			}
		})
		if err := c.installCRD(ctx); err != nil {
			return err
		}
		return c.removeLeftovers(ctx)
	}()
	if berr := <-built; err == nil {
		err = berr
	}
	return b, stop, err
}

// report prints the table, writes it to -out and writes the plots.
func (b *bench) report(results []result) {
	table := b.table(results)
	fmt.Print(table)
	if b.out != "" {
		// A folder it names is made, and a table that cannot be written
		// does not keep the plots from being written.
		if err := os.MkdirAll(filepath.Dir(b.out), 0o755); err != nil {
			b.fail("-out: %v", err)
		} else if err := os.WriteFile(b.out, []byte(table), 0o644); err != nil {
			b.fail("-out: %v", err)
		}
	}
	plots := cmp.Or(b.plots, b.logDir)
	if err := os.MkdirAll(plots, 0o755); err != nil {
		b.fail("plots: %v", err)
	} else if files, err := b.writePlots(plots, results); err != nil {
		b.fail("plots: %v", err)
	} else {
		for _, f := range files {
			logf("plot: %s", f)
		}
	}
}

// setLogger sends the logs of the in-process controllers (and client-go's)
// to a file, as JSON.
func setLogger(path string) error {
	cfg := zap.NewProductionConfig()
	cfg.OutputPaths = []string{path}
	cfg.ErrorOutputPaths = []string{path}
	cfg.Level = zap.NewAtomicLevelAt(zapcore.InfoLevel)
	cfg.Sampling = nil
	z, err := cfg.Build()
	if err != nil {
		return err
	}
	logger := zapr.NewLogger(z)
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	return nil
}

// logf reports progress on stderr; stdout carries only the table.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// debugf reports details when BENCH_DEBUG is set.
func debugf(format string, args ...any) {
	if os.Getenv("BENCH_DEBUG") != "" {
		logf(format, args...)
	}
}
