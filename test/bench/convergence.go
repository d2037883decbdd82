package main

import (
	"context"
	"fmt"
	"maps"
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
	for _, x := range b.contenders() {
		if ctx.Err() != nil {
			break
		}
		logf("== %s, %s", res.ready.id, x.name())
		sample := b.converge(ctx, x, s.k, s.n, res.ready, res.down, b.size.scaleTo)
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

// converge runs 0 -> n for k sets with one contender, into res, and then,
// when down is not nil, the scale-down of every set to `to` pods, into
// down. It returns the contender's pod s0-0 once converged, if it made
// one.
func (b *bench) converge(ctx context.Context, x contender, k, n int32, res, down *timedResult, to int32) (sample *corev1.Pod) {
	err := b.session(ctx, fmt.Sprintf("%dx%d-%s", k, n, slug(x.name())), x, x.kinds(), func(ns string) error {
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
