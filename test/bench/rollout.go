package main

import (
	"context"
	"fmt"
	"time"
)

// rollout is one set of N pods with maxUnavailable 100% whose template
// moves to revision 2 (a label and an environment variable: the pods must
// be replaced), with every contender that rolls out (roller).
type rollout struct{}

// rolloutResult is what the rollout scenario measured.
type rolloutResult struct {
	n   int32
	res *timedResult
}

func (rollout) phase() string { return "rollout" }

func (rollout) run(ctx context.Context, b *bench) result {
	n := b.size.rollout
	out := &rolloutResult{n: n, res: &timedResult{id: fmt.Sprintf("rollout %d", n)}}
	for _, x := range b.contenders() {
		r, ok := x.(roller)
		if !ok || ctx.Err() != nil {
			continue
		}
		logf("== rollout %d, %s", n, x.name())
		b.rollOut(ctx, x, r, n, out.res)
	}
	return out
}

// rollOut sets up one set of n pods with maxUnavailable 100% and times
// the change of its template.
func (b *bench) rollOut(ctx context.Context, x contender, r roller, n int32, res *timedResult) {
	id := res.id
	err := b.session(ctx, "ro-"+slug(x.name()), x, x.kinds(), func(ns string) error {
		j := job{ns: ns, sets: setNames(1), n: n, rollout: true}
		if err := b.setUp(ctx, x, j, "the rollout's starting point", func(s *state) bool { return x.ready(s, j) }); err != nil {
			return err
		}
		time.Sleep(settle)
		m := b.timed(ctx, b.size.rolloutBudget, func(ctx context.Context) error { return r.rollout(ctx, j) },
			func(s *state) bool { return r.rolledOut(s, j) }, progress(j, "2", "pods of the new template"))
		m.pods = int(n)
		res.record(b, x.name(), m)
		switch {
		case m.cutoff:
			// kwok's stale deletes (see rolloutBudget) may keep killing the
			// re-created pods; the contender's own part must still be done:
			// no pod of the old template is left.
			b.obs.read(func(s *state) {
				for _, p := range s.pods {
					if p.ns == ns && !p.terminating && p.rev != "2" {
						b.fail("%s, %s: pod %s still runs the old template after %s", id, x.name(), p.name, fmtDur(m.dur))
					}
				}
			})
		case m.err == nil:
			b.verifyPods(ctx, id, x, j, n)
		}
		return nil
	})
	if err != nil {
		b.fail("%s, %s: %v", id, x.name(), err)
	}
}

func (r *rolloutResult) rows(b *bench) []row {
	return b.timedRows(fmt.Sprintf("rollout of %d (maxUnavailable 100%%)", r.n), r.res, 0, false)
}
