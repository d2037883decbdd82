package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// The scale scenario (-only scale; make bench-scale): K PodSets of N pods
// (1000 x 10 by default) to Ready, beside K ReplicaSets and K
// StatefulSets of the same shape, each in a namespace of its own; then,
// over the converged PodSets, the operator restarted, and a leader change
// between two replicas; last, each contender's sets scaled down to a
// tenth of N (at least one pod), by an operator started again for it. A
// restart and a leader change must cost no write, and the first full pass
// over every PodSet must end within twice the time the caches took to
// sync. The operator runs as a subprocess with its metrics endpoint on
// 127.0.0.1, read with a token bound to podset-bench-metrics: its passes,
// work queue, writes and heap.

// scaleResult is what the scale scenario measured.
type scaleResult struct {
	k, n int32
	// res is every contender's K x N to Ready, down its scale-down to
	// `to` pods per set.
	res, down *timedResult
	to        int32
	// peakHeap is the operator's largest heap in use (HeapAlloc, sampled)
	// while it converged the PodSets, peakRSS its peak resident set, and
	// liveGrowth its largest live heap (what the last GC kept) above its
	// live heap before the first PodSet: what its caches hold for them.
	peakHeap, peakRSS, liveGrowth uint64
	restart, leader               *restartResult
	err                           error
}

// restartResult is an operator (re)start over converged PodSets.
type restartResult struct {
	// sync is from the start (for a leader change: from the old leader's
	// SIGTERM) to the controller's workers starting, which they do once
	// the caches are synced (and the replica leads); pass is to the end of
	// the first pass over every PodSet.
	sync, pass time.Duration
	// writes are the operator's own non-read requests by method
	// (rest_client_requests_total): its Lease, and the TokenReviews and
	// SubjectAccessReviews of the benchmark's scrapes among them. requests
	// is what the API server counted meanwhile, and stateWrites the writes
	// among them to anything but Leases, Nodes (kwok's heartbeats) and
	// those reviews, by "VERB group/resource/subresource".
	writes      map[string]int
	requests    counts
	stateWrites map[string]int
	peakHeap    uint64
	err         error
}

func (r *restartResult) totalStateWrites() int {
	n := 0
	for _, v := range r.stateWrites {
		n += v
	}
	return n
}

// stateWrites are the writes of a request diff that change the state of
// workloads: all but Leases (and the leader election's core/v1 event about
// one), Nodes, TokenReviews and SubjectAccessReviews.
func stateWrites(d requests) map[string]int {
	out := map[string]int{}
	for k, v := range d {
		if k.Seconds {
			continue
		}
		switch {
		case k.Resource == "leases", k.Resource == "nodes", k.Resource == "tokenreviews", k.Resource == "subjectaccessreviews":
			continue
		case k.Group == "" && k.Resource == "events":
			// The leader election's event about the Lease ("became
			// leader"): a core/v1 event, where the operator's own events
			// about PodSets go through events.k8s.io and are counted.
			continue
		}
		if testenv.IsWrite(k.Verb) && v > 0 {
			out[requestName(k)] += int(v)
		}
	}
	return out
}

// scaleUp is the scale scenario for K x N.
type scaleUp struct{ k, n int32 }

func (scaleUp) phase() string { return "scale" }

func (s scaleUp) run(ctx context.Context, b *bench) result {
	k, n := s.k, s.n
	id := "scale " + convID(k, n)
	logf("== %s", id)
	to := max(1, n/10)
	res := &scaleResult{k: k, n: n, res: &timedResult{id: id}, to: to,
		down: &timedResult{id: fmt.Sprintf("%s → %d per set", id, to)}}
	// 110 pods fit a kwok node; ten percent to spare.
	nodes := max(b.size.nodes, int(k*n)*11/1000+1)
	if err := b.c.up(ctx, nodes); err != nil {
		res.err = err
		b.fail("%s: %v", id, err)
		return res
	}
	for _, x := range []contender{&replicaSetContender{kcm{b}}, &statefulSetContender{kcm{b}}} {
		if !b.runs(contenderKind(x.name())) || ctx.Err() != nil {
			continue
		}
		logf("== %s, %s", id, x.name())
		b.converge(ctx, x, k, n, "", res.res, res.down, to)
	}
	if b.runs("podset") {
		logf("== %s, podset, then its restart and a leader change", id)
		res.err = b.scalePodSet(ctx, res, id)
		if res.err != nil {
			b.fail("%s, podset: %v", id, res.err)
		}
	}
	return res
}

// scalePodSet converges K x N PodSets under an operator whose metrics it
// reads, then restarts the operator and changes its leader.
func (b *bench) scalePodSet(ctx context.Context, res *scaleResult, id string) error {
	token, err := b.metricsToken(ctx)
	if err != nil {
		return err
	}
	x := &podSetContender{b: b}
	j := job{sets: setNames(res.k), n: res.n}
	return b.session(ctx, "scale-podset", x, x.kinds(), func(ns string) error {
		j.ns = ns
		m := b.createTimed(ctx, x, j, res.res, 0)
		if m.err != nil {
			return m.err
		}
		res.peakHeap, res.peakRSS, res.liveGrowth = m.peakHeap, peakRSS(x.op), m.liveGrowth
		logf("%s, podset: peak heap %s (%.2f KiB per pod), live heap grown by %s (%.2f KiB per pod), peak RSS %s", id, mib(res.peakHeap),
			float64(res.peakHeap)/1024/float64(m.pods), mib(res.liveGrowth), float64(res.liveGrowth)/1024/float64(m.pods), mib(res.peakRSS))
		b.c.ctrlPID.Store(0)
		if err := x.stop(); err != nil {
			return fmt.Errorf("stopping the operator: %w", err)
		}
		time.Sleep(settle)

		res.restart = b.restart(ctx, ns, token, int(res.k))
		logf("%s, podset restart: %s", id, res.restart)
		res.leader = b.leaderChange(ctx, ns, token, int(res.k))
		logf("%s, podset leader change: %s", id, res.leader)

		// The scale-down, under an operator of its own, once it has
		// passed over every PodSet (its caches synced, nothing to do).
		if _, err := x.start(ctx, []string{ns}); err != nil {
			return fmt.Errorf("starting the operator again: %w", err)
		}
		defer func() { _ = x.stop() }()
		time.Sleep(settle)
		b.scaleDown(ctx, x, j, res.to, res.down)
		return nil
	})
}

func (r *restartResult) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("workers after %s, first full pass after %s (%.2fx), peak heap %s, writes to workloads %v, the operator's non-read requests by method %v; at the API server: %s",
		fmtDur(r.sync), fmtDur(r.pass), r.pass.Seconds()/r.sync.Seconds(), mib(r.peakHeap), r.stateWrites, r.writes, r.requests)
}

// launchMetered launches the operator on ns, logging to logName, with its
// metrics endpoint on a free port of 127.0.0.1 read with token, and extra
// flags after that one.
func (b *bench) launchMetered(logName, ns, token string, extra ...string) (*operatorProcess, *operatorMetrics, error) {
	port, err := testenv.FreePort()
	if err != nil {
		return nil, nil, err
	}
	flags := append([]string{"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(port)}, extra...)
	op, err := launchOperator(b.operatorBin, b.c.kubeconfig, logPath(b.logDir, logName), []string{ns}, b.operatorFlags(flags...)...)
	if err != nil {
		return nil, nil, err
	}
	return op, newOperatorMetrics(port, token), nil
}

// restart starts one operator over the converged PodSets of ns and
// measures its start and first full pass.
func (b *bench) restart(ctx context.Context, ns, token string, sets int) *restartResult {
	r := &restartResult{}
	r.err = func() error {
		before, err := b.c.scrape(ctx)
		if err != nil {
			return err
		}
		op, m, err := b.launchMetered("podset-operator-restart", ns, token)
		if err != nil {
			return err
		}
		defer func() { _ = op.stop() }()
		s := m.sample(100 * time.Millisecond)
		defer s.stop()
		if err := s.waitPass(ctx, op, sets); err != nil {
			return err
		}
		return r.finish(ctx, b, op, op.Started, before, m, s)
	}()
	return r
}

// finish records an operator's start (or takeover) from since: when its
// workers started and its first full pass ended, and, after two settle
// times, the requests since before, its writes and its peak heap.
func (r *restartResult) finish(ctx context.Context, b *bench, op *operatorProcess, since time.Time, before requests, m *operatorMetrics, s *sampler) error {
	<-op.Ready()
	r.sync, r.pass = op.ReadyAt.Sub(since), s.passAt().Sub(since)
	time.Sleep(2 * settle)
	after, err := b.c.scrape(ctx)
	if err != nil {
		return err
	}
	r.requests, r.stateWrites = countsOf(after.Sub(before)), stateWrites(after.Sub(before))
	r.writes, err = m.writes(ctx)
	r.peakHeap = s.peakHeap()
	return err
}

// leaderChange runs two replicas with leader election over the converged
// PodSets of ns, waits for the leader's first full pass, stops the leader
// and measures the other's takeover from that moment.
func (b *bench) leaderChange(ctx context.Context, ns, token string, sets int) *restartResult {
	r := &restartResult{}
	r.err = func() error {
		type replica struct {
			op *operatorProcess
			m  *operatorMetrics
			s  *sampler
		}
		var replicas []*replica
		defer func() {
			for _, x := range replicas {
				x.s.stop()
				_ = x.op.stop()
			}
		}()
		for i := range 2 {
			op, m, err := b.launchMetered(fmt.Sprintf("podset-operator-replica-%d", i), ns, token,
				"--leader-elect=true", "--leader-election-namespace="+ns, "--leader-election-id=podset-bench")
			if err != nil {
				return err
			}
			replicas = append(replicas, &replica{op: op, m: m, s: m.sample(100 * time.Millisecond)})
		}
		var leader, standby *replica
		select {
		case <-replicas[0].op.Ready():
			leader, standby = replicas[0], replicas[1]
		case <-replicas[1].op.Ready():
			leader, standby = replicas[1], replicas[0]
		case <-time.After(2 * time.Minute):
			return errors.New("no replica became the leader within two minutes")
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := leader.s.waitPass(ctx, leader.op, sets); err != nil {
			return fmt.Errorf("the first leader: %w", err)
		}
		time.Sleep(2 * settle)
		before, err := b.c.scrape(ctx)
		if err != nil {
			return err
		}
		stopped := time.Now()
		if err := leader.op.stop(); err != nil {
			return fmt.Errorf("stopping the leader: %w", err)
		}
		if err := standby.s.waitPass(ctx, standby.op, sets); err != nil {
			return fmt.Errorf("the new leader: %w", err)
		}
		return r.finish(ctx, b, standby.op, stopped, before, standby.m, standby.s)
	}()
	return r
}

// ---------------------------------------------------------------- metrics

// metricsReader is the name of the ServiceAccount (in default) and of the
// ClusterRole and binding that let the benchmark read the operator's
// metrics, as a Prometheus would.
const metricsReader = "podset-bench-metrics"

// metricsToken makes sure the benchmark's metrics reader exists and
// returns a token for it.
func (b *bench) metricsToken(ctx context.Context) (string, error) {
	if b.token != "" {
		return b.token, nil
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceDefault, Name: metricsReader}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: metricsReader}}
	for _, obj := range []client.Object{role, binding, sa} {
		if err := b.c.cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating the metrics reader: %w", err)
		}
	}
	token, err := testenv.ServiceAccountToken(ctx, b.c.cl, sa, time.Hour)
	b.token = token
	return token, err
}

// operatorMetrics reads one operator's metrics endpoint.
type operatorMetrics struct {
	url, token string
	hc         *http.Client
}

func newOperatorMetrics(port int, token string) *operatorMetrics {
	return &operatorMetrics{
		url:   "https://127.0.0.1:" + strconv.Itoa(port) + "/metrics",
		token: token,
		// The operator's own self-signed certificate, on loopback.
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed
		}},
	}
}

// read scrapes the endpoint for the named metric families only (the
// name[] parameter of the Prometheus handler), or all of them when none
// is named: the operator then encodes a few series instead of every one,
// most of them per PodSet. It still gathers them all first, so the
// benchmark's scrapes (see sampler) remain part of the CPU it
// measures for the operator (docs/benchmarks.md, "The CPU column").
func (m *operatorMetrics) read(ctx context.Context, families ...string) (testenv.Metrics, error) {
	u := m.url
	if len(families) > 0 {
		u += "?" + url.Values{"name[]": families}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", m.url, resp.Status, body)
	}
	return testenv.ParseMetrics(resp.Body)
}

// writes is the operator's writes so far by HTTP method.
func (m *operatorMetrics) writes(ctx context.Context) (map[string]int, error) {
	f, err := m.read(ctx, "rest_client_requests_total")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for method, n := range f.SumBy("rest_client_requests_total", "method") {
		if method != "GET" && method != "LIST" && method != "WATCH" {
			out[method] = int(n)
		}
	}
	return out, nil
}

// sampler scrapes an operator every interval: its heap in use (garbage
// included) and its live heap (go_gc_heap_live_bytes: what the last GC
// kept, the measure of the memory phase), and whether its first full
// pass is done. A scrape costs the operator CPU (gathering
// every series, rendering, TLS): about 13 ms with 1000 PodSets on the
// machine of 2026-11-25, which once a second was 7.7% of the operator's
// CPU creating 1000 x 1 (controller's BenchmarkScrape gathers 1000
// PodSets' series). So the timed
// scenarios, which measure that CPU, sample every 5 s and at the start and
// end of each measured window (for the passes); the restart and the leader
// change, which time a pass, every 100 ms.
type sampler struct {
	m      *operatorMetrics
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	heap uint64
	// live is the largest live heap since mark, liveBase the live heap
	// when mark was called.
	live, liveBase uint64
	depth          float64
	// passes is how many passes the podset controller has finished,
	// whatever their result.
	passes float64
	// gates is how many gate writes (podset_operator_pod_writes_total
	// with kind gate: closes and opens) the operator has sent.
	gates float64
	// at is when the first scrape that found passes >= want and an empty
	// queue was sent; want 0 means not asked yet.
	at   time.Time
	want float64
	errs int
}

func (m *operatorMetrics) sample(interval time.Duration) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{m: m, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.scrape()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// scrape reads the operator's heap, queue and passes once.
func (s *sampler) scrape() {
	sent := time.Now()
	f, err := s.m.read(s.ctx, "go_memstats_heap_alloc_bytes", "go_gc_heap_live_bytes", "workqueue_depth", "controller_runtime_reconcile_total", "podset_operator_pod_writes_total")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		return
	}
	heap, _ := f.Sample("go_memstats_heap_alloc_bytes", nil)
	s.heap = max(s.heap, uint64(heap))
	live, _ := f.Sample("go_gc_heap_live_bytes", nil)
	s.live = max(s.live, uint64(live))
	// The priority queue keeps a depth per priority (the initial list's
	// adds low, events' normal): the queue is empty when their sum is.
	s.depth = f.SumBy("workqueue_depth", "name")["podset"]
	s.passes = f.SumBy("controller_runtime_reconcile_total", "controller")["podset"]
	s.gates = f.SumBy("podset_operator_pod_writes_total", "kind")["gate"]
	if s.want > 0 && s.at.IsZero() && s.passes >= s.want && s.depth == 0 {
		s.at = sent
	}
}

// waitPass waits until op's controller has finished at least sets passes
// with nothing left in its queue: one pass over every PodSet of a
// converged state.
func (s *sampler) waitPass(ctx context.Context, op *operatorProcess, sets int) error {
	s.mu.Lock()
	s.want = float64(sets)
	s.mu.Unlock()
	deadline := time.After(10 * time.Minute)
	for {
		s.mu.Lock()
		at, passes, errs := s.at, s.passes, s.errs
		s.mu.Unlock()
		if !at.IsZero() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-op.Exited():
			return fmt.Errorf("the operator exited: %v", op.ExitErr())
		case <-deadline:
			return fmt.Errorf("no full pass over %d PodSets within ten minutes (%v passes, %d failed scrapes)", sets, passes, errs)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *sampler) passAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at
}

func (s *sampler) peakHeap() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heap
}

// mark starts a measured window: the peak heaps from now on, the live
// heap now as the window's base, and the passes and gate writes counted
// so far, scraped now.
func (s *sampler) mark() (passes, gates float64) {
	s.mu.Lock()
	s.live = 0
	s.mu.Unlock()
	passes, gates, _ = s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heap, s.liveBase = 0, s.live
	return passes, gates
}

// liveGrowth is the largest live heap since mark above the one at mark.
func (s *sampler) liveGrowth() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live - min(s.live, s.liveBase)
}

// now is, scraped now, how many passes the controller has finished, the
// gate writes the operator has sent, and its peak heap.
func (s *sampler) now() (passes, gates float64, heap uint64) {
	s.scrape()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.passes, s.gates, s.heap
}

func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

// peakRSS is a running process's peak resident set (VmHWM), 0 when it
// cannot be read.
func peakRSS(op *operatorProcess) uint64 {
	if op == nil || op.Cmd.Process == nil {
		return 0
	}
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(op.Cmd.Process.Pid), "status"))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// scaleRows are the rows of the scale scenario: K x N to Ready for each
// contender, the operator's peak heap, and its restart and leader change.
func (sr *scaleResult) rows(b *bench) []row {
	id := sr.res.id
	pods := int(sr.k * sr.n)
	rows := b.timedRows(id+" → ready", sr.res, pods, true)
	rows = append(rows, b.timedRows(fmt.Sprintf("%s → %d per set (pods gone)", id, sr.to), sr.down, 0, false)...)
	if sr.liveGrowth > 0 {
		// The memory phase's measure, of a subprocess: the live heap its
		// pods and sets add, not the heap in use, which holds garbage too.
		perPod := float64(sr.liveGrowth) / 1024 / float64(pods)
		rows = append(rows, row{scenario: id + " → ready", contender: "podset",
			measured: fmt.Sprintf("peak heap in use %s (sampled, garbage included), peak RSS %s", mib(sr.peakHeap), mib(sr.peakRSS)),
			check:    fmt.Sprintf("live heap (go_gc_heap_live_bytes, sampled) grown by %s from before the first PodSet: %.2f KiB per pod", mib(sr.liveGrowth), perPod),
			target:   "≤ 4 KiB per pod", result: metStr(perPod <= 4)})
	}
	for _, x := range []struct {
		title string
		r     *restartResult
	}{{"operator restart over " + convID(sr.k, sr.n), sr.restart}, {"leader change over " + convID(sr.k, sr.n), sr.leader}} {
		if x.r == nil {
			continue
		}
		r := dashRow(x.title, "podset")
		if x.r.err != nil {
			r.measured, r.check, r.target, r.result = "failed: "+shortErr(x.r.err), "—", "—", "missed"
			rows = append(rows, r)
			continue
		}
		r.measured = fmt.Sprintf("first full pass after %s (workers after %s), peak heap %s", fmtDur(x.r.pass), fmtDur(x.r.sync), mib(x.r.peakHeap))
		r.setCounts(x.r.requests)
		r.check = fmt.Sprintf("writes to pods, statuses, revisions, events: %d %v (the operator's Lease and its metrics scrapes' reviews aside: %v)",
			x.r.totalStateWrites(), x.r.stateWrites, x.r.writes)
		r.target, r.result = "0 writes", metStr(x.r.totalStateWrites() == 0)
		rows = append(rows, r)
		r.check = fmt.Sprintf("first full pass / caches synced: %.2f", x.r.pass.Seconds()/x.r.sync.Seconds())
		r.target, r.result = "≤ 2", metStr(x.r.pass <= 2*x.r.sync)
		rows = append(rows, r)
	}
	return rows
}
