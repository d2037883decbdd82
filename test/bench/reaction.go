package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// reactionResult is one contender's converged pass and reaction times.
type reactionResult struct {
	converged *measurement
	// passes is how many passes the converged-pass trigger caused: known
	// for the in-process controllers, -1 for kube-controller-manager.
	passes  int
	touches int
	// transport: spec change to the first pod write handed to the
	// in-process operator's transport (podset only). watch: spec change to
	// the first ADDED pod event on the benchmark's own watch.
	transport, watch []time.Duration
	err              error
}

// reaction is the converged pass and the reaction time, with the operator
// built in this process (to count its passes and timestamp its requests),
// the ReplicaSet controller and the tutorial.
type reaction struct{}

// reactionResults are the reaction scenario's results by contender.
type reactionResults struct {
	podset, replicaset, tutorial *reactionResult
}

func (reaction) phase() string { return "reaction" }

func (reaction) run(ctx context.Context, b *bench) result {
	logf("== converged pass and reaction")
	out := &reactionResults{}
	if b.runs("podset") {
		rec := &recorder{}
		out.podset = b.react(ctx, &inProcessPodSet{podSetContender{b: b}, rec}, rec, "podset")
	}
	if b.runs("replicaset") {
		out.replicaset = b.react(ctx, &replicaSetContender{kcm{b}}, nil, "")
	}
	if b.runs("tutorial") {
		out.tutorial = b.react(ctx, &tutorialContender{b: b}, nil, "tutorial")
	}
	return out
}

// scalingContender is a contender that scales its sets.
type scalingContender interface {
	contender
	scaler
}

// react starts from reactionSets converged sets, measures the writes of a
// converged pass (one pod label touched per set), then times trials
// single-replica scale-ups of the first set.
func (b *bench) react(ctx context.Context, x scalingContender, rec *recorder, controllerName string) *reactionResult {
	res := &reactionResult{passes: -1}
	res.err = b.session(ctx, "re-"+slug(x.name()), x, x.kinds(), func(ns string) error {
		j := job{ns: ns, sets: setNames(b.size.reactionSets), n: b.size.reactionReplicas}
		if err := b.setUp(ctx, x, j, "the starting point", func(s *state) bool { return x.ready(s, j) }); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, b.size.timeout)
		defer cancel()
		// Let deferred status writes (the operator's StatusInterval) pass.
		time.Sleep(2 * settle)
		if err := b.convergedPass(ctx, x, ns, controllerName, res); err != nil {
			return err
		}
		return b.reactionTrials(ctx, wctx, x, rec, j, res)
	})
	if res.err != nil {
		b.fail("reaction, %s: %v", x.name(), res.err)
	}
	return res
}

// convergedPass measures the writes of a converged pass: it touches a
// label of one pod per set of ns and counts the requests that follow.
func (b *bench) convergedPass(ctx context.Context, x scalingContender, ns, controllerName string, res *reactionResult) error {
	// A converged pass: touch a label of one pod per set.
	var touch []string
	b.obs.read(func(s *state) {
		seen := map[string]bool{}
		for _, p := range s.pods {
			if p.ns == ns && !p.terminating && !seen[p.set] {
				seen[p.set] = true
				touch = append(touch, p.name)
			}
		}
	})
	slices.Sort(touch)
	before, err := b.c.scrape(ctx)
	if err != nil {
		return err
	}
	passes0 := reconciles(controllerName)
	start := time.Now()
	for _, name := range touch {
		patch := []byte(`{"metadata":{"labels":{"` + touchLabel + `":"1"}}}`)
		if _, err := b.c.cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: benchFieldManager}); err != nil {
			return err
		}
	}
	if controllerName == "podset" {
		// Wait (in-process counter) until every touched set had its pass.
		for reconciles(controllerName) < passes0+float64(len(touch)) && time.Since(start) < 10*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
	} else {
		time.Sleep(settle)
	}
	time.Sleep(settle)
	after, err := b.c.scrape(ctx)
	if err != nil {
		return err
	}
	c := countsOf(after.Sub(before))
	c.podCreates -= len(touch) // the benchmark's own label patches
	res.converged = &measurement{dur: time.Since(start), counts: c}
	res.touches = len(touch)
	if controllerName != "" {
		res.passes = int(reconciles(controllerName) - passes0)
	}
	logf("converged pass, %s: %d touches, %d passes; %s", x.name(), len(touch), res.passes, c)
	return nil
}

// reactionTrials times trials single-replica scale-ups of the first set
// of j: from the scale's answer to the new pod's ADDED event (watch) and,
// in process, to the operator's first pod write (transport).
func (b *bench) reactionTrials(ctx, wctx context.Context, x scalingContender, rec *recorder, j job, res *reactionResult) error {
	ns := j.ns
	// Reaction trials on the first set.
	first := job{ns: ns, sets: j.sets[:1], n: j.n}
	for i := range b.size.trials {
		n := j.n + int32(i)
		cur := job{ns: ns, sets: first.sets, n: n}
		t := time.Now()
		if err := b.obs.waitFor(wctx, "set s0 ready", func(s *state) bool { return x.ready(s, cur) }); err != nil {
			return err
		}
		if i > 0 {
			debugf("trial %d: ready %s after the pod was added", i-1, time.Since(t))
		}
		time.Sleep(300*time.Millisecond + rand.N(100*time.Millisecond))
		mark := time.Now()
		if err := x.scale(ctx, cur, n+1); err != nil {
			return err
		}
		returned := time.Now()
		var added time.Time
		if err := b.obs.waitFor(wctx, "a new pod", func(s *state) bool { added = s.firstAddAfter(ns, mark); return !added.IsZero() }); err != nil {
			return err
		}
		res.watch = append(res.watch, added.Sub(returned))
		if rec != nil {
			w, ok := rec.firstWriteAfter(mark)
			if !ok {
				return fmt.Errorf("trial %d: no pod write recorded", i)
			}
			res.transport = append(res.transport, w.Sub(returned))
		}
	}
	return nil
}

func (rr *reactionResults) rows(b *bench) []row {
	return append(rr.convergedRows(b), rr.reactionRows(b)...)
}

// namedReaction is a contender's result with its name in the table.
type namedReaction struct {
	name string
	res  *reactionResult
}

func (rr *reactionResults) named() []namedReaction {
	return []namedReaction{{"podset (in-process)", rr.podset}, {"replicaset", rr.replicaset}, {"tutorial", rr.tutorial}}
}

func (rr *reactionResults) convergedRows(b *bench) []row {
	title := fmt.Sprintf("converged pass (%d x %d, one pod label touched per set)", b.size.reactionSets, b.size.reactionReplicas)
	var rows []row
	for _, x := range rr.named() {
		name, res := x.name, x.res
		if res == nil || res.converged == nil {
			continue
		}
		c := res.converged.counts
		r := dashRow(title, name)
		r.setCounts(c)
		r.measured = fmt.Sprintf("%d touches", res.touches)
		if res.passes >= 0 {
			r.measured = fmt.Sprintf("%d passes for %d touches", res.passes, res.touches)
		}
		writes := c.podCreates + c.podDeletes + c.statusWrites
		if contenderKind(name) == "podset" {
			r.check = fmt.Sprintf("%d writes", writes)
			r.target = "0"
			r.result = metStr(writes == 0 && res.passes >= res.touches)
			if res.passes < res.touches {
				r.check += " (fewer passes than touches: not a converged pass)"
			}
		} else if res.passes == 0 {
			r.check = "no pass ran: its event filter drops pod label changes"
		}
		rows = append(rows, r)
	}
	return rows
}

func (rr *reactionResults) reactionRows(b *bench) []row {
	title := fmt.Sprintf("reaction: replicas +1 → first pod write (%d trials)", b.size.trials)
	var rows []row
	add := func(name, how string, d []time.Duration, targeted bool) {
		if len(d) == 0 {
			return
		}
		p99 := testenv.Percentile(d, 99)
		r := dashRow(title, name)
		r.measured, r.check = fmt.Sprintf("p50 %s, p99 %s", fmtMs(testenv.Percentile(d, 50)), fmtMs(p99)), how
		if targeted {
			r.target, r.result = "p99 ≤ 20 ms", metStr(p99 <= 20*time.Millisecond)
		}
		rows = append(rows, r)
	}
	for _, x := range rr.named() {
		if x.res != nil { // only the in-process operator's transport is recorded
			add(x.name, "first pod write at the operator's transport", x.res.transport, true)
			add(x.name, "first ADDED pod event on a watch", x.res.watch, false)
		}
	}
	return rows
}
