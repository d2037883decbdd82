package main

import (
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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func main() {
	size := flag.String("size", "full", "tiny (every scenario at a tiny size, about two minutes) or full")
	out := flag.String("out", "", "also write the table to this file")
	flag.BoolVar(&traceSets, "trace", false, "run the operator with --log-level debug and print one PodSet's pass timeline after each convergence")
	policy := flag.String("podset-policy", "", "podUpdatePolicy of the benchmark's PodSets: empty (the default, InPlaceIfPossible) or Recreate; the pods carry the operator's readiness gate either way")
	plots := flag.String("plots", "", "write the SVG plots of pods Ready over time into this folder (default: the run's log folder)")
	keep := flag.Bool("keep-cluster", false, "keep the podset-bench cluster at the end even if this run created it")
	onlyPhases := flag.String("only", "", "run only these phases, comma-separated (conv, rollout, inplace, reaction, memory; scale, which only runs when named here)")
	scaleFlag := flag.String("scale", "1000x10", "the scale phase's K PodSets (and ReplicaSets, StatefulSets) x N pods")
	convFlag := flag.String("conv", "", "replace the convergence scenarios, e.g. 100x10,1x1000 (the scale-down follows a first 1xN): a debugging aid")
	operatorFlags := flag.String("operator-flags", "", "extra flags for the operator subprocess, e.g. \"--max-concurrent-reconciles=16\": a debugging aid")
	flag.StringVar(&profileDir, "profile", "", "write kube-apiserver's CPU profile of every timed scenario into this folder: a folder per scenario and contender, of 3 s slices that go tool pprof reads as one")
	who := flag.String("contenders", "", "run only these contenders, comma-separated (limit, gated-limit (in-place only), podset, replicaset, statefulset, kruise with KRUISE_DIR, tutorial): a debugging aid")
	flag.Parse()
	for _, c := range strings.Split(*who, ",") {
		if c = strings.TrimSpace(c); c != "" {
			only[c] = true
		}
	}
	if only["kruise"] && kruiseDir() == "" {
		fmt.Fprintln(os.Stderr, "bench: the kruise contender needs KRUISE_DIR, the folder make kruise builds (make bench sets it)")
		os.Exit(2)
	}
	phases = map[string]bool{}
	for _, p := range strings.Split(*onlyPhases, ",") {
		if p = strings.TrimSpace(p); p != "" {
			phases[p] = true
		}
	}

	var s sizes
	switch *size {
	case "full":
		s = full
	case "tiny":
		s = tiny
	default:
		fmt.Fprintln(os.Stderr, "bench: -size must be tiny or full")
		os.Exit(2)
	}
	if *convFlag != "" {
		s.conv = nil
		for _, kn := range strings.Split(*convFlag, ",") {
			var k, n int32
			if _, err := fmt.Sscanf(strings.TrimSpace(kn), "%dx%d", &k, &n); err != nil || k < 1 || n < 1 {
				fmt.Fprintln(os.Stderr, "bench: -conv takes KxN,KxN...")
				os.Exit(2)
			}
			s.conv = append(s.conv, [2]int32{k, n})
		}
	}
	if _, err := fmt.Sscanf(*scaleFlag, "%dx%d", &scaleShape[0], &scaleShape[1]); err != nil || scaleShape[0] < 1 || scaleShape[1] < 1 {
		fmt.Fprintln(os.Stderr, "bench: -scale takes KxN")
		os.Exit(2)
	}
	podUpdatePolicy = podsetv1alpha1.PodUpdatePolicy(*policy)
	operatorArgs = strings.Fields(*operatorFlags)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	code := run(ctx, s, *out, *plots, *keep)
	cancel()
	os.Exit(code)
}

func run(ctx context.Context, s sizes, out, plots string, keep bool) int {
	began := time.Now()
	c, err := newCluster()
	if err != nil {
		logf("%v", err)
		return 1
	}
	logDir := filepath.Join(c.root, "bin", "bench", "logs", c.runID)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		logf("%v", err)
		return 1
	}
	if err := setLogger(logPath(logDir, "in-process")); err != nil {
		logf("%v", err)
		return 1
	}
	logf("size %s, run %s, logs in %s", s.name, c.runID, logDir)

	nodes := s.nodes
	logf("starting or reusing the %s cluster with %d nodes", clusterName, nodes)
	if err := c.up(ctx, nodes); err != nil {
		logf("%v", err)
		return 1
	}
	defer func() {
		if c.existed || keep {
			logf("leaving the %s cluster running (%s)", clusterName, c.kubeconfig)
			return
		}
		logf("deleting the %s cluster", clusterName)
		if err := c.down(context.Background()); err != nil {
			logf("%v", err)
		}
	}()
	release, err := c.lock(ctx)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer release()
	b := &bench{
		c: c, size: s, logDir: logDir,
		operatorBin: filepath.Join(c.root, "bin", "bench", "podset-operator"),
		results:     map[string]map[string]*measurement{},
		limitBest:   map[string]string{},
		limitLoops:  map[string]map[string]*limitRun{},
		samples:     map[string]*corev1.Pod{},
		reaction:    map[string]*reactionResult{},
	}
	if err := b.prepare(ctx); err != nil {
		logf("%v", err)
		return 1
	}

	var contenders []contender
	for _, create := range []bool{false, true} {
		for _, w := range s.workers {
			contenders = append(contenders, &limitContender{b: b, w: w, creates: create})
		}
	}
	contenders = append(contenders, &podSetContender{b: b}, &replicaSetContender{b: b}, &statefulSetContender{b: b})
	if kruiseDir() != "" {
		contenders = append(contenders, &kruiseContender{b: b})
	}
	contenders = append(contenders, &tutorialContender{b: b})
	contenders = slices.DeleteFunc(contenders, func(x contender) bool { return len(only) > 0 && !only[contenderKind(x.name())] })

	for i, kn := range s.conv {
		if !phase("conv") {
			break
		}
		for _, x := range contenders {
			if ctx.Err() != nil {
				break
			}
			logf("== %s, %s", convID(kn[0], kn[1]), x.name())
			b.convergence(ctx, kn[0], kn[1], i == 0 && kn[0] == 1 && kn[1] > s.scaleTo, x, convID(kn[0], kn[1]))
		}
		b.logLimitLoops(convID(kn[0], kn[1]))
		if i == 0 && kn[0] == 1 && kn[1] > s.scaleTo {
			b.logLimitLoops(fmt.Sprintf("scale %d -> %d", kn[1], s.scaleTo))
		}
		if i == 0 && ctx.Err() == nil {
			b.checkSamePods()
		}
	}
	for _, x := range contenders {
		if x.canRollout() && ctx.Err() == nil && phase("rollout") {
			logf("== rollout %d, %s", s.rollout, x.name())
			b.rolloutScenario(ctx, x)
		}
	}
	if ctx.Err() == nil && phase("inplace") {
		b.inPlacePhase(ctx)
	}
	if ctx.Err() == nil && phase("reaction") {
		logf("== converged pass and reaction")
		rec := &recorder{}
		if len(only) == 0 || only["podset"] {
			b.reaction["podset (in-process)"] = b.reactionScenario(ctx, &inProcessPodSet{podSetContender{b: b}, rec}, rec, "podset")
		}
		if len(only) == 0 || only["replicaset"] {
			b.reaction["replicaset"] = b.reactionScenario(ctx, &replicaSetContender{b: b}, nil, "")
		}
		if len(only) == 0 || only["tutorial"] {
			b.reaction["tutorial"] = b.reactionScenario(ctx, &tutorialContender{b: b}, nil, "tutorial")
		}
	}
	if ctx.Err() == nil && phase("memory") {
		logf("== memory")
		b.memory = b.memoryScenario(ctx)
	}
	if ctx.Err() == nil && phases["scale"] {
		logf("== scale %s", convID(scaleShape[0], scaleShape[1]))
		b.scale = b.scaleScenario(ctx, scaleShape[0], scaleShape[1])
	}
	if ctx.Err() != nil {
		b.fail("interrupted: %v", ctx.Err())
	} else if err := c.deleteNamespaces(ctx, b.leftover...); err != nil {
		b.fail("deleting the run's namespaces: %v", err)
	}

	table := b.table()
	fmt.Print(table)
	if out != "" {
		// A folder it names is made, and a table that cannot be written
		// does not keep the plots from being written.
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			b.fail("-out: %v", err)
		} else if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			b.fail("-out: %v", err)
		}
	}
	if plots == "" {
		plots = logDir
	}
	if err := os.MkdirAll(plots, 0o755); err != nil {
		b.fail("plots: %v", err)
	} else if files, err := b.writePlots(plots); err != nil {
		b.fail("plots: %v", err)
	} else {
		for _, f := range files {
			logf("plot: %s", f)
		}
	}
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

// scaleShape is K x N of the scale phase (-scale).
var scaleShape [2]int32

// operatorArgs are extra flags for the operator subprocess.
var operatorArgs []string

// only holds the contenders -contenders selects; all when empty.
var only = map[string]bool{}

// phases are the phases -only selects; all when empty.
var phases map[string]bool

func phase(name string) bool { return len(phases) == 0 || phases[name] }

// prepare removes what interrupted runs left, installs the CRD and builds
// the operator.
func (b *bench) prepare(ctx context.Context) error {
	if err := b.c.installCRD(ctx); err != nil {
		return err
	}
	if err := b.c.removeLeftovers(ctx); err != nil {
		return err
	}
	logf("building %s", b.operatorBin)
	return buildOperator(ctx, b.c.root, b.operatorBin)
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

func sortStrings(s []string) []string {
	sort.Strings(s)
	return s
}
