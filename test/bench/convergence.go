package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// convergence is K sets of N replicas from zero to ready, with every
// contender; the first scenario, when it is one set of more than scaleTo
// replicas, is then scaled down to scaleTo by the contenders that scale.
// The first scenario also checks that the limit's pods are the operator's.
type convergence struct {
	k, n  int32
	first bool
	// again is how many times the shape ran before in this run (-conv
	// 100x10,100x10): every other time the contenders run in the reverse
	// order, so that none always runs first, and the table adds each
	// ratio's median over the runs (repeats).
	again int
}

// convergenceResult is what a convergence scenario measured.
type convergenceResult struct {
	k, n  int32
	ready *timedResult
	// down is the scale-down's, nil when there is none.
	down *timedResult
}

func (convergence) phase() string { return "conv" }

// scalesDown reports whether the scale-down follows.
func (s *convergence) scalesDown(b *bench) bool { return s.first && s.k == 1 && s.n > b.size.scaleTo }

func (s *convergence) run(ctx context.Context, b *bench) result {
	res := &convergenceResult{k: s.k, n: s.n, ready: &timedResult{id: convID(s.k, s.n)}}
	if s.scalesDown(b) {
		res.down = &timedResult{id: fmt.Sprintf("scale %d -> %d", s.n, b.size.scaleTo)}
	}
	samples := map[string]*corev1.Pod{} // pod s0-0, by sampleKey
	xs := b.contenders()
	if s.again%2 == 1 {
		slices.Reverse(xs)
	}
	for _, x := range xs {
		if ctx.Err() != nil {
			break
		}
		logf("== %s, %s", res.ready.id, x.name())
		sample := b.converge(ctx, x, s.k, s.n, s.tag(), res.ready, res.down, b.size.scaleTo)
		if key := sampleKey(x.name()); samples[key] == nil && sample != nil {
			samples[key] = sample
		}
	}
	res.ready.logLimitLoops()
	if res.down != nil {
		res.down.logLimitLoops()
	}
	if s.first && ctx.Err() == nil {
		b.checkSamePods(samples)
	}
	return res
}

// tag tells a repeated shape's namespaces from the first run's, which the
// tiny size deletes only at the end.
func (s *convergence) tag() string {
	if s.again == 0 {
		return ""
	}
	return fmt.Sprintf("r%d", s.again+1)
}

// converge runs 0 -> n for k sets with one contender, into res, and then,
// when down is not nil, the scale-down of every set to `to` pods, into
// down. tag is added to its namespace's name. It returns the contender's
// pod s0-0 once converged, if it made one.
func (b *bench) converge(ctx context.Context, x contender, k, n int32, tag string, res, down *timedResult, to int32) (sample *corev1.Pod) {
	err := b.session(ctx, fmt.Sprintf("%dx%d%s-%s", k, n, tag, slug(x.name())), x, x.kinds(), func(ns string) error {
		j := job{ns: ns, sets: setNames(k), n: n}
		if err := prepareContender(ctx, x, j); err != nil {
			return err
		}
		m := b.createTimed(ctx, x, j, res, b.tutorialBudget(res, x))
		if b.trace && contenderKind(x.name()) == "podset" {
			b.traceSet(res.id, ns, j.sets[0], logPath(b.logDir, "podset-operator"), m.start)
		}
		_, scales := x.(scaler)
		if m.cutoff && down != nil && scales {
			down.record(b, x.name(), &measurement{skipped: true,
				note: fmt.Sprintf("not run: %s did not reach %d ready pods", x.name(), n)})
		}
		if !m.completed() {
			return nil
		}
		sample = b.verifyPods(ctx, res.id, x, j, n)
		if kind := contenderKind(x.name()); kind == "podset" && m.counts.podCreates+m.counts.podDeletes != int(k*n) {
			b.fail("%s, %s: %d pod writes for %d new pods, want exactly %d", res.id, x.name(), m.counts.podCreates+m.counts.podDeletes, k*n, k*n)
		} else if kind == "limit" && m.counts.podCreates != int(k*n) {
			b.fail("%s, %s: the API server counted %d pod writes for the limit's %d pods: the request counts are polluted", res.id, x.name(), m.counts.podCreates, k*n)
		}
		if down == nil || !scales {
			return nil
		}
		time.Sleep(settle)
		b.scaleDown(ctx, x, j, to, down)
		return nil
	})
	if err != nil {
		b.fail("%s, %s: %v", res.id, x.name(), err)
	}
	return sample
}

// createTimed times, after a third of settle, x's creation of j's sets
// until they are ready, within budget, and records it into res with the
// curve of the pods' readiness.
func (b *bench) createTimed(ctx context.Context, x contender, j job, res *timedResult, budget time.Duration) *measurement {
	time.Sleep(settle / 3)
	m := b.timed(ctx, budget, func(ctx context.Context) error { return x.create(ctx, j) },
		func(s *state) bool { return x.ready(s, j) }, progress(j, "", "pods"))
	m.pods = len(j.sets) * int(j.n)
	m.curve = b.obs.readyCurve(j.ns, m.start)
	res.record(b, x.name(), m)
	return m
}

// scaleDown scales every set of j, converged at j.n pods, down to `to`
// (x must be a scaler), and records the time until the pods above are gone
// into down.
func (b *bench) scaleDown(ctx context.Context, x contender, j job, to int32, down *timedResult) {
	sc := x.(scaler)
	m := b.timed(ctx, b.tutorialBudget(down, x), func(ctx context.Context) error { return sc.scale(ctx, j, to) },
		func(s *state) bool { return podsRemaining(s, j.ns, j.sets, to) }, nil)
	m.pods = len(j.sets) * int(j.n-to)
	down.record(b, x.name(), m)
	if m.err == nil {
		b.verifyPods(ctx, down.id, x, j, to)
	}
}

// checkSamePods checks that the limit applied the operator's pods: the same
// spec (but the node) and the same labels. Both loops of the limit are
// checked, each against the operator's pod, when -contenders runs both.
func (b *bench) checkSamePods(samples map[string]*corev1.Pod) {
	if !b.runs("podset") || !b.runs("limit") {
		return
	}
	op := samples["podset"]
	for _, loop := range []string{"apply", "create"} {
		lim := samples["limit "+loop]
		if op == nil || lim == nil {
			b.fail("no pod s0-0 of both the operator and the limit's %s loop to compare", loop)
			continue
		}
		a, c := op.Spec.DeepCopy(), lim.Spec.DeepCopy()
		a.NodeName, c.NodeName = "", ""
		if !equality.Semantic.DeepEqual(a, c) {
			b.fail("the limit's %s loop's pods differ from the operator's: spec %+v, want %+v", loop, c, a)
		}
		if !maps.Equal(op.Labels, lim.Labels) {
			b.fail("the limit's %s loop's pods differ from the operator's: labels %v, want %v", loop, lim.Labels, op.Labels)
		}
	}
}

func (r *convergenceResult) rows(b *bench) []row {
	rows := b.timedRows(r.ready.id+" → ready", r.ready, int(r.k*r.n), true)
	if r.down != nil {
		rows = append(rows, b.timedRows(fmt.Sprintf("1 x %d → %d (pods gone)", r.n, b.size.scaleTo), r.down, 0, false)...)
	}
	return rows
}

// repeats are the rows of the shapes that ran more than once: for each,
// the median over its runs of each ratio the table holds to a target, with
// every run's value, so that a run's noise (a quarter of the API server's
// CPU for the same requests, docs/benchmarks.md) settles no target alone.
func repeats(results []result) []row {
	byID := map[string][]*timedResult{}
	var ids []string
	for _, r := range results {
		c, ok := r.(*convergenceResult)
		if !ok {
			continue
		}
		if byID[c.ready.id] == nil {
			ids = append(ids, c.ready.id)
		}
		byID[c.ready.id] = append(byID[c.ready.id], c.ready)
	}
	var rows []row
	for _, id := range ids {
		runs := byID[id]
		if len(runs) < 2 {
			continue
		}
		title := fmt.Sprintf("%s → ready, %d runs", id, len(runs))
		for _, x := range []struct {
			check string
			bound float64
			value func(*timedResult) (float64, bool)
		}{
			{"podset / limit", limitBound, timeRatio("podset", "limit")},
			{"podset / replicaset", replicaSetBound(id, title, true), timeRatio("podset", "replicaset")},
			{"podset / statefulset", statefulSetBound, timeRatio("podset", "statefulset")},
			{"API server CPU per pod, podset / replicaset", apiCPUBound, cpuRatio("podset", "replicaset", apiCPU)},
			{"API server CPU per pod, the limit's apply loop / replicaset: the floor of the operator's pod and gate writes", 0, cpuRatio("limit apply", "replicaset", apiCPU)},
			{"API server CPU per pod, podset / the limit's apply loop", limitBound, cpuRatio("podset", "limit apply", apiCPU)},
			{"controller CPU, podset-operator / kube-controller-manager (ReplicaSet)", controllerCPUBound, cpuRatio("podset", "replicaset", controllerCPU)},
		} {
			var vals []float64
			var each []string
			for _, r := range runs {
				if v, ok := x.value(r); ok {
					vals = append(vals, v)
					each = append(each, fmt.Sprintf("%.2f", v))
				}
			}
			if len(vals) < 2 {
				continue
			}
			m := median(vals)
			r := dashRow(title, "podset")
			r.check = fmt.Sprintf("%s: median %.2f (runs: %s)", x.check, m, strings.Join(each, ", "))
			if x.bound > 0 {
				r.target, r.result = fmt.Sprintf("≤ %g", x.bound), metStr(m <= x.bound)
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// timeRatio is podset's time over a contender's in a run, when both
// completed.
func timeRatio(a, b string) func(*timedResult) (float64, bool) {
	return func(r *timedResult) (float64, bool) {
		x, y := r.of(a), r.of(b)
		if !finished(x) || !finished(y) || y.dur <= 0 {
			return 0, false
		}
		return x.dur.Seconds() / y.dur.Seconds(), true
	}
}

// cpuRatio is contender a's CPU over b's in a run (kinds, or "limit
// apply"), of what pick takes from their windows (all create the same
// pods).
func cpuRatio(a, b string, pick func(cpuTimes) (time.Duration, bool)) func(*timedResult) (float64, bool) {
	return func(r *timedResult) (float64, bool) {
		x, y := r.of(a), r.of(b)
		if !finished(x) || !finished(y) {
			return 0, false
		}
		a, okA := pick(x.cpu)
		b, okB := pick(y.cpu)
		if !okA || !okB || b <= 0 {
			return 0, false
		}
		return a.Seconds() / b.Seconds(), true
	}
}

// apiCPU and controllerCPU pick the API server's CPU and the
// controller's.
func apiCPU(c cpuTimes) (time.Duration, bool)        { return c.api, c.ok }
func controllerCPU(c cpuTimes) (time.Duration, bool) { return c.ctrl, c.ctrlOK }

// finished reports that a contender ran to the end of a scenario.
func finished(m *measurement) bool { return m != nil && !m.skipped && m.completed() }

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
