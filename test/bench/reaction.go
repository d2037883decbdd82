package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// reactionScenario starts from reactionSets converged sets, measures the
// writes of a converged pass (one pod label touched per set), then times
// trials single-replica scale-ups of the first set.
func (b *bench) reactionScenario(ctx context.Context, x contender, rec *recorder, controllerName string) *reactionResult {
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
		c := after.sub(before).counts()
		c.podCreates -= len(touch) // the benchmark's own label patches
		res.converged = &measurement{dur: time.Since(start), counts: c}
		res.touches = len(touch)
		if controllerName != "" {
			res.passes = int(reconciles(controllerName) - passes0)
		}
		logf("converged pass, %s: %d touches, %d passes; %s", x.name(), len(touch), res.passes, c)

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
			err := b.obs.waitFor(wctx, "a new pod", func(s *state) bool {
				for _, p := range s.pods {
					if p.ns == ns && p.added.After(mark) {
						return true
					}
				}
				return false
			})
			if err != nil {
				return err
			}
			added, _ := b.obs.firstAddAfter(ns, mark)
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
	})
	if res.err != nil {
		b.fail("reaction, %s: %v", x.name(), res.err)
	}
	return res
}

// percentile is the nearest-rank percentile of the samples.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}
