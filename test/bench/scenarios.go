package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sizes are the dimensions of one run.
type sizes struct {
	name string
	// conv lists the convergence scenarios, K sets of N replicas each; the
	// first has one set, and is then scaled down to scaleTo.
	conv    [][2]int32 // K sets of N replicas
	scaleTo int32
	// scale is the scale scenario's K sets of N replicas, unless -scale
	// says otherwise.
	scale [2]int32
	// rollout is the replicas of the rollout scenario's one set.
	rollout int32
	// inPlace is the replicas of the in-place scenario's one set.
	inPlace int32
	// reactionSets x reactionReplicas is the converged state the
	// converged-pass and reaction scenarios start from; trials is how many
	// single-replica scale-ups are timed.
	reactionSets, reactionReplicas int32
	trials                         int
	// The memory scenario: memSets PodSets of mem1, then mem2 replicas
	// each, then unrelated pods.
	memSets, mem1, mem2, unrelated int32
	workers                        []int
	timeout                        time.Duration
	// deleteNamespaces deletes each run's namespace once it is empty, and
	// waits until it is gone (about five seconds); tiny leaves the empty
	// namespaces to the end of the run instead, where they go with the
	// cluster if the run made it. Either way the namespace controller
	// never works during a measurement.
	deleteNamespaces bool
	// budgetTutorial stops the tutorial at tutorialBudget.
	budgetTutorial bool
	// rolloutBudget bounds the rollout scenario. The pods' grace period is
	// 0 (see template), which keeps kwok's by-name deletes out of it; the
	// bound stays, so that a contender caught in anything like that chain
	// is reported as cut off, not waited for, once the benchmark has
	// checked that no pod of the old template is left.
	rolloutBudget   time.Duration
	nodes, memNodes int
}

var (
	full = sizes{
		name: "full",
		conv: [][2]int32{{1, 1000}, {10, 100}, {100, 10}, {1000, 1}}, scaleTo: 100,
		scale:        [2]int32{1000, 10},
		rollout:      100,
		inPlace:      1000,
		reactionSets: 10, reactionReplicas: 10, trials: 50,
		memSets: 10, mem1: 100, mem2: 1000, unrelated: 10000,
		workers: []int{8, 32, 128},
		timeout: 10 * time.Minute, deleteNamespaces: true, budgetTutorial: true,
		rolloutBudget: time.Minute,
		nodes:         12, memNodes: 100,
	}
	tiny = sizes{
		name: "tiny",
		conv: [][2]int32{{1, 10}, {2, 5}, {5, 2}}, scaleTo: 2,
		scale:        [2]int32{10, 5},
		rollout:      5,
		inPlace:      5,
		reactionSets: 2, reactionReplicas: 2, trials: 3,
		memSets: 2, mem1: 5, mem2: 10, unrelated: 20,
		workers: []int{32},
		timeout: 2 * time.Minute, rolloutBudget: 30 * time.Second,
		nodes: 2, memNodes: 2,
	}
)

// measurement is one contender's result in one scenario.
type measurement struct {
	dur     time.Duration
	counts  counts
	err     error
	cutoff  bool   // stopped at its budget (see tutorialBudget)
	skipped bool   // not run, note says why
	note    string // how far it got when cut off
	// recreated is how many pods the in-place scenario found with a UID
	// they did not have before.
	recreated int
	// cpu is the CPU time of the API server and etcd in the measured
	// window; pods is how many pods the scenario creates, deletes or
	// replaces, for the CPU per 1000 pods.
	cpu  cpuTimes
	pods int
	// start is when the trigger was sent; curve, for a convergence, is
	// when each pod became Ready from start (plot.go).
	start time.Time
	curve []time.Duration
	// passes and peakHeap are the operator's passes finished in the
	// window and its largest heap in use (sampled HeapAlloc), liveGrowth
	// its largest live heap above the one at the window's start; podset
	// only.
	passes               int
	peakHeap, liveGrowth uint64
	// requests are the API server's requests in the window (the source of
	// counts). gateWrites is, for podset, the operator's own count of its
	// gate writes in the window (podset_operator_pod_writes_total, kind
	// gate), and gateCloses, in the in-place scenario, how many of the
	// pods/status PATCHes were the contender's gate closes, not kwok's
	// (-1: not known).
	requests   requests
	gateWrites int
	gateCloses int
	// apiProfile is kube-apiserver's CPU profile over the measured window
	// (-profile) in back-to-back slices, or nil.
	apiProfile [][]byte
}

// completed reports whether m ran to its end: neither failed nor cut off
// at its budget. One that did not is already in its table row (record),
// so what a scenario does after it is skipped, not counted as a second
// failure.
func (m *measurement) completed() bool { return m.err == nil && !m.cutoff }

// bench is one run of the benchmark: its settings, its cluster and what
// the scenarios share while they run.
type bench struct {
	config
	c           *cluster
	operatorBin string
	logDir      string
	obs         *observer // the observer of the run in progress
	leftover    []string  // empty namespaces to delete at the end
	// deleteCluster: the run made the cluster and deletes it at the end.
	deleteCluster bool
	failures      []string

	// token reads the operator's metrics; ctrl samples them while the
	// podset contender runs (scale.go).
	token string
	ctrl  *sampler
}

func (b *bench) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	logf("FAIL: %s", msg)
	b.failures = append(b.failures, msg)
}

// timedResult is every contender's measurement in one timed scenario (id:
// "1 x 10", "scale 10 -> 2", "rollout 5", "in-place 5").
type timedResult struct {
	id                                                            string
	gatedLimit, podset, replicaset, statefulset, kruise, tutorial *measurement
	// limit is the best of the limit's runs (both loops, every worker
	// count), limitBest says which ("create W=128"), and apply and create
	// are each loop's best.
	limit         *measurement
	limitBest     string
	apply, create *limitRun
}

// of is the measurement of a contender kind ("limit" is the limit's best,
// "limit apply" its apply loop's best), or nil.
func (r *timedResult) of(kind string) *measurement {
	if kind == "limit apply" {
		if r.apply == nil {
			return nil
		}
		return r.apply.m
	}
	if s := r.slot(kind); s != nil {
		return *s
	}
	return nil
}

// empty reports that no contender was measured.
func (r *timedResult) empty() bool {
	for _, s := range r.slots() {
		if *s != nil {
			return false
		}
	}
	return true
}

// slot is where the measurement of a contender kind goes, nil for none.
func (r *timedResult) slot(kind string) **measurement { return r.slots()[kind] }

// slots are the measurements' places by contender kind.
func (r *timedResult) slots() map[string]**measurement {
	return map[string]**measurement{"limit": &r.limit, "gated-limit": &r.gatedLimit, "podset": &r.podset,
		"replicaset": &r.replicaset, "statefulset": &r.statefulset, "kruise": &r.kruise, "tutorial": &r.tutorial}
}

// record logs a contender's measurement, fails the run on its error and
// keeps it.
func (r *timedResult) record(b *bench, contender string, m *measurement) {
	b.writeProfile(r.id, contender, m)
	if m.err != nil {
		b.fail("%s, %s: %v", r.id, contender, m.err)
	}
	if m.skipped {
		logf("%s, %s: %s", r.id, contender, m.note)
	} else if m.cutoff {
		logf("%s, %s: cut off after %s (%s); %s", r.id, contender, fmtDur(m.dur), m.note, m.counts)
	} else {
		logf("%s, %s: %s; %s%s", r.id, contender, fmtDur(m.dur), m.counts, m.cpuLog())
	}
	if how, ok := strings.CutPrefix(contender, "limit "); ok {
		loop := &r.apply
		if strings.HasPrefix(how, "create ") {
			loop = &r.create
		}
		if *loop == nil || better(m, (*loop).m) {
			*loop = &limitRun{how: how, m: m}
		}
		if better(m, r.limit) {
			r.limit, r.limitBest = m, how
		}
		return
	}
	if slot := r.slot(contenderKind(contender)); slot != nil {
		*slot = m
	}
}

// limitRun is the best run of one of the limit's loops in a scenario; how
// is "apply W=32".
type limitRun struct {
	how string
	m   *measurement
}

// better reports whether m beats best: a measured time beats a failure, a
// skip or a cut-off, and a shorter time a longer one.
func better(m, best *measurement) bool {
	ok := func(x *measurement) bool { return x.err == nil && !x.skipped && !x.cutoff }
	switch {
	case best == nil:
		return true
	case !ok(m):
		return !ok(best) && m.err == nil && best.err != nil
	case !ok(best):
		return true
	}
	return m.dur < best.dur
}

// limitLoopsSummary is each limit loop's best run, e.g. "apply 1.20 s
// (W=32), create 1.05 s (W=32)".
func (r *timedResult) limitLoopsSummary() string {
	var parts []string
	for _, l := range []struct {
		loop string
		r    *limitRun
	}{{"apply", r.apply}, {"create", r.create}} {
		if l.r == nil {
			continue
		}
		loop, m := l.loop, l.r.m
		_, w, _ := strings.Cut(l.r.how, " ")
		switch {
		case m.skipped:
			parts = append(parts, loop+" not run")
		case m.err != nil:
			parts = append(parts, loop+" failed")
		case m.cutoff:
			parts = append(parts, fmt.Sprintf("%s > %s (%s)", loop, fmtDur(m.dur), w))
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", loop, fmtDur(m.dur), w))
		}
	}
	return strings.Join(parts, ", ")
}

// logLimitLoops logs the best run of each of the limit's loops, so that
// applies and creates can be compared.
func (r *timedResult) logLimitLoops() {
	if s := r.limitLoopsSummary(); s != "" {
		logf("%s, limit: best %s; reported: %s", r.id, s, r.limitBest)
	}
}

func setNames(k int32) []string {
	sets := make([]string, k)
	for i := range sets {
		sets[i] = "s" + strconv.Itoa(i)
	}
	return sets
}

func convID(k, n int32) string { return fmt.Sprintf("%d x %d", k, n) }

// timed runs trigger, waits for done on the observer, and measures the
// time and the API requests in between. The requests are scraped again
// after settle, so that writes a controller sends right after the
// condition holds are counted too.
func (b *bench) timed(ctx context.Context, budget time.Duration, trigger func(context.Context) error, done func(*state) bool, progress func(*state) string) *measurement {
	before, err := b.c.scrape(ctx)
	if err != nil {
		return &measurement{err: err}
	}
	if budget <= 0 || budget > b.size.timeout {
		budget = b.size.timeout
	}
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	cpuBefore := b.c.cpu()
	var passesBefore, gatesBefore float64
	if b.ctrl != nil {
		passesBefore, gatesBefore = b.ctrl.mark()
	}
	stopProfile := b.c.profileCPU(ctx, b.profileDir)
	start := time.Now()
	m := &measurement{start: start}
	if err := trigger(wctx); err != nil {
		m.err = err
	} else if err := b.obs.waitFor(wctx, "convergence", done); err != nil {
		m.err = err
	}
	m.cpu = b.c.cpu().sub(cpuBefore)
	if m.err != nil && wctx.Err() != nil && budget < b.size.timeout && ctx.Err() == nil {
		// Cut off at its budget: not a failure, a lower bound.
		m.err, m.cutoff = nil, true
		if progress != nil {
			b.obs.read(func(s *state) { m.note = progress(s) })
		}
	}
	m.dur = time.Since(start)
	// The profile's last slice ends up to profileSlice later: after the
	// time is taken, so that it never waits for it.
	m.apiProfile = stopProfile()
	time.Sleep(settle)
	if b.ctrl != nil {
		passes, gates, heap := b.ctrl.now()
		m.passes, m.peakHeap, m.gateWrites = int(passes-passesBefore), heap, int(gates-gatesBefore+0.5)
		m.liveGrowth = b.ctrl.liveGrowth()
	}
	after, err := b.c.scrape(ctx)
	if err != nil && m.err == nil {
		m.err = err
	}
	m.requests = after.Sub(before)
	m.counts = countsOf(m.requests)
	return m
}

// tutorialBudget is how long the tutorial may take in a full-size scenario:
// once it is 15 times slower than the operator, the ratio's target (at
// least 10) is settled, and the tutorial can stall for up to 1000 s per
// PodSet (see docs/benchmarks.md), so waiting longer only costs time.
func (b *bench) tutorialBudget(res *timedResult, x contender) time.Duration {
	ps := res.podset
	if contenderKind(x.name()) != "tutorial" || !b.size.budgetTutorial || ps == nil || ps.err != nil {
		return 0
	}
	return max(15*ps.dur, time.Minute)
}

// progress describes how far a job got: its live ready pods (for a
// rollout, of revision rev, the new template) against all it wants.
func progress(j job, rev, what string) func(*state) string {
	return func(s *state) string {
		ready := 0
		for _, p := range s.pods {
			if p.ns == j.ns && p.ready && !p.terminating && (rev == "" || p.rev == rev) {
				ready++
			}
		}
		return fmt.Sprintf("%d of %d %s ready", ready, len(j.sets)*int(j.n), what)
	}
}

// settle is how long the benchmark waits before it reads the request
// counters after a scenario converged, or before it starts one.
const settle = 1500 * time.Millisecond

// session sets up one contender's run in a fresh namespace and tears it
// down afterwards: stop the contender, delete everything, wait for the
// pods and the namespace to be gone.
func (b *bench) session(ctx context.Context, id string, x contender, what kinds, body func(ns string) error) error {
	ns, err := b.c.namespace(ctx, id)
	if err != nil {
		return err
	}
	obs, err := newObserver(ctx, b.c, []string{ns}, what|kindPods)
	if err != nil {
		return err
	}
	b.obs = obs
	defer func() { obs.stop(); b.obs = nil }()
	b.c.ctrlPID.Store(0)
	stop, err := startContender(ctx, x, []string{ns})
	if err == nil {
		err = body(ns)
		b.c.ctrlPID.Store(0)
		if serr := stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping %s: %w", x.name(), serr)
		}
	}
	// Clean up even when the run was interrupted.
	if cerr := b.clear(context.WithoutCancel(ctx), obs, ns); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// clear empties a namespace of the run and waits until obs saw its pods
// go; then it deletes the namespace and waits until it is gone, or, in the
// tiny size, leaves that to the end of the run (see
// sizes.deleteNamespaces).
func (b *bench) clear(ctx context.Context, obs *observer, ns string) error {
	err := b.c.empty(ctx, obs, ns)
	if err == nil && b.size.deleteNamespaces {
		return b.c.deleteNamespaces(ctx, ns)
	}
	b.leftover = append(b.leftover, ns)
	return err
}

// setUp prepares and creates a contender's sets, untimed, and waits, for
// up to the size's timeout, until the observer sees them at the starting
// point of a timed step (ready).
func (b *bench) setUp(ctx context.Context, x contender, j job, what string, ready func(*state) bool) error {
	if err := prepareContender(ctx, x, j); err != nil {
		return err
	}
	if err := x.create(ctx, j); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, b.size.timeout)
	defer cancel()
	return b.obs.waitFor(wctx, what, ready)
}

// verifyPods checks the pods on the API server itself: every set has
// exactly n live pods, and the limit's and the operator's are named
// <set>-0 to <set>-<n-1>. It returns pod s0-0, if there is one.
func (b *bench) verifyPods(ctx context.Context, id string, x contender, j job, n int32) (sample *corev1.Pod) {
	list, err := b.c.cs.CoreV1().Pods(j.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.fail("%s, %s: listing pods: %v", id, x.name(), err)
		return nil
	}
	names := map[string][]string{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil {
			names[p.Labels[setLabel]] = append(names[p.Labels[setLabel]], p.Name)
		}
		if p.Name == "s0-0" {
			sample = p.DeepCopy()
		}
	}
	kind := contenderKind(x.name())
	for _, set := range j.sets {
		got := names[set]
		if len(got) != int(n) {
			b.fail("%s, %s: set %s has %d live pods, want %d", id, x.name(), set, len(got), n)
			continue
		}
		if kind != "limit" && kind != "gated-limit" && kind != "podset" {
			continue
		}
		var want []string
		for i := range n {
			want = append(want, podName(set, int(i)))
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			b.fail("%s, %s: set %s has pods %v, want %v", id, x.name(), set, got, want)
		}
	}
	return sample
}

// sampleKey is the key of a contender's pod s0-0 in samples: its kind, and
// for the limit also its loop ("limit apply").
func sampleKey(name string) string {
	if kind := contenderKind(name); kind != "limit" {
		return kind
	}
	f := strings.Fields(name)
	return f[0] + " " + f[1]
}

// slug makes a contender's name fit a namespace name.
func slug(name string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// contenderKind maps "limit apply W=8" to "limit", "podset (in-process)" to "podset".
func contenderKind(name string) string {
	name, _, _ = strings.Cut(name, " ")
	return name
}
