package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// row is one line of the result table.
type row struct {
	scenario, contender, measured, podWrites, statusWrites, podGets, check, target, result string
	// cpu is the API server's, etcd's and the controller's CPU per 1000
	// pods ("—" when empty).
	cpu string
}

// table renders every result as one markdown table.
func (b *bench) table() string {
	var rows []row
	for i, kn := range b.size.conv {
		id := convID(kn[0], kn[1])
		rows = append(rows, b.timedRows(id+" → ready", id, int(kn[0]*kn[1]), true)...)
		if i == 0 && kn[0] == 1 {
			sid := fmt.Sprintf("scale %d -> %d", kn[1], b.size.scaleTo)
			rows = append(rows, b.timedRows(fmt.Sprintf("1 x %d → %d (pods gone)", kn[1], b.size.scaleTo), sid, 0, false)...)
		}
	}
	rows = append(rows, b.timedRows(fmt.Sprintf("rollout of %d (maxUnavailable 100%%)", b.size.rollout), fmt.Sprintf("rollout %d", b.size.rollout), 0, false)...)
	rows = append(rows, b.inPlaceRows()...)
	rows = append(rows, b.convergedRows()...)
	rows = append(rows, b.reactionRows()...)
	rows = append(rows, b.memoryRows()...)
	rows = append(rows, b.scaleRows()...)

	var sb strings.Builder
	sb.WriteString("| Scenario | Contender | Measured | Pod writes (create/apply + delete) | Status writes | Pod GETs | CPU per 1000 pods: API server / etcd / controller | Check | Target | Result |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.cpu == "" {
			r.cpu = "—"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.scenario, r.contender, r.measured, r.podWrites, r.statusWrites, r.podGets, r.cpu, r.check, r.target, r.result)
	}
	return sb.String()
}

// timedRows are the rows of one timed scenario. newPods, when above zero,
// adds the request-count targets of a 0 -> N scenario.
func (b *bench) timedRows(title, id string, newPods int, requestTargets bool) []row {
	res := b.results[id]
	if res == nil {
		return nil
	}
	lim, ps, rs, sts, kr, tut := res["limit"], res["podset"], res["replicaset"], res["statefulset"], res["kruise"], res["tutorial"]
	base := func(name string, m *measurement) row { return measuredRow(title, name, m) }
	var rows []row
	if lim != nil {
		rows = append(rows, b.limitRow(title, id, lim))
	}
	if ps != nil {
		r := base("podset", ps)
		r.check, r.target, r.result = ratioCheck("podset / limit", ps, lim, 1.1, false)
		rows = append(rows, r)
	}
	if rs != nil {
		name := "replicaset"
		if strings.HasPrefix(id, "rollout") {
			name = "replicaset (Deployment)"
		}
		r := base(name, rs)
		if bound := replicaSetBound(id, requestTargets); bound > 0 {
			r.check, r.target, r.result = ratioCheck("podset / replicaset", ps, rs, bound, false)
		} else {
			r.check = ratioOnly("podset / replicaset", ps, rs)
		}
		rows = append(rows, r)
	}
	if sts != nil {
		r := base("statefulset (Parallel)", sts)
		r.check, r.target, r.result = ratioCheck("podset / statefulset", ps, sts, 1.0, false)
		rows = append(rows, r)
	}
	if kr != nil {
		r := base("kruise (CloneSet)", kr)
		r.check = ratioOnly("podset / kruise", ps, kr)
		rows = append(rows, r)
	}
	if tut != nil {
		// A reference: on this cluster the tutorial is only 2 to 2.5 times
		// slower than the limit, so no ratio to podset is a target.
		r := base("tutorial", tut)
		r.check = ratioOnly("tutorial / podset", tut, ps)
		rows = append(rows, r)
	} else if strings.HasPrefix(id, "rollout") {
		r := base("tutorial", nil)
		r.measured = "n/a: the tutorial ignores its template"
		rows = append(rows, r)
	}
	if requestTargets && ps != nil && ps.err == nil {
		writes := ps.counts.podCreates + ps.counts.podDeletes
		r := row{scenario: title, contender: "podset", measured: "", podWrites: "", statusWrites: "", podGets: ""}
		r.check = fmt.Sprintf("pod writes %d for N = %d new pods", writes, newPods)
		r.target, r.result = "= N", metStr(writes == newPods)
		rows = append(rows, r)
		r.check = fmt.Sprintf("status writes %d = %.1f%% of N", ps.counts.statusWrites, 100*float64(ps.counts.statusWrites)/float64(newPods))
		r.target, r.result = "≤ 5% of N", metStr(float64(ps.counts.statusWrites) <= 0.05*float64(newPods))
		rows = append(rows, r)
		if ps.peakHeap > 0 {
			r.check = fmt.Sprintf("operator: %d passes (%.2f per pod), peak heap in use %s (sampled)", ps.passes, float64(ps.passes)/float64(newPods), mib(ps.peakHeap))
			r.target, r.result = "—", "—"
			rows = append(rows, r)
		}
		if rs != nil && rs.err == nil && ps.cpu.ctrlOK && rs.cpu.ctrlOK && rs.cpu.ctrl > 0 {
			r.check = fmt.Sprintf("controller CPU: podset-operator %.2f s, kube-controller-manager (ReplicaSet) %.2f s: %.2f",
				ps.cpu.ctrl.Seconds(), rs.cpu.ctrl.Seconds(), ps.cpu.ctrl.Seconds()/rs.cpu.ctrl.Seconds())
			r.target, r.result = "≤ 1.0", metStr(ps.cpu.ctrl <= rs.cpu.ctrl)
			rows = append(rows, r)
		}
	}
	return rows
}

// replicaSetBound is the target of podset / replicaset in a scenario, or
// 0 for none. Creating pods (growth, 0 -> N): every pod carries the
// readiness gate, whatever its podUpdatePolicy, so what the one more
// write per pod costs and no more (1.15), except for 1000 x 1,
// where each set's revision and custom-resource status write are measured
// against StatefulSet, which pays both too. Everything else: 1.0.
func replicaSetBound(id string, growth bool) float64 {
	switch {
	case !growth:
		return 1.0
	case strings.HasSuffix(id, " x 1"):
		return 0
	}
	return 1.15
}

// measuredRow is the row of one contender's timed measurement.
func measuredRow(title, name string, m *measurement) row {
	r := row{scenario: title, contender: name, measured: "—", podWrites: "—", statusWrites: "—", podGets: "—", check: "—", target: "—", result: "—"}
	if m == nil {
		r.measured = "not run"
		return r
	}
	if m.skipped {
		r.measured = m.note
		return r
	}
	r.measured = fmtDur(m.dur)
	if m.cutoff {
		r.measured = "> " + fmtDur(m.dur) + " (cut off: " + m.note + ")"
	}
	if m.err != nil {
		r.measured = "failed: " + shortErr(m.err)
	}
	r.podWrites = fmt.Sprintf("%d + %d", m.counts.podCreates, m.counts.podDeletes)
	r.statusWrites = fmt.Sprint(m.counts.statusWrites)
	r.podGets = fmt.Sprint(m.counts.podGets)
	r.cpu = cpuPer1000(m)
	return r
}

// limitRow is the limit's row: the best of its worker counts.
func (b *bench) limitRow(title, id string, lim *measurement) row {
	loops := "apply, create"
	if len(b.limitLoops[id]) == 1 {
		loops = "apply loop only"
	}
	name := fmt.Sprintf("limit (best: %s; %s)", b.limitBest[id], loops)
	if lim.skipped {
		name = "limit"
	}
	r := measuredRow(title, name, lim)
	var ws []string
	for _, w := range b.size.workers {
		ws = append(ws, fmt.Sprint(w))
	}
	r.check = "reference (best of W = " + strings.Join(ws, ", ") + ": " + b.limitLoopsSummary(id) + ")"
	return r
}

// inPlaceRows are the rows of the in-place scenario: the operator against
// the limit, the gated limit, Deployment and StatefulSet, what updating in
// place means for its requests, and each contender's API writes per pod.
// On kwok a pod's creation is free (no image, no container, no sandbox),
// so the Deployment's recreation is no target there: the operator's
// kube-apiserver CPU per pod is measured against the gated limit's, the
// same writes and waits sent by a plain loop.
func (b *bench) inPlaceRows() []row {
	id := inPlaceID(b.size.inPlace)
	res := b.results[id]
	if res == nil {
		return nil
	}
	title := fmt.Sprintf("in-place rollout of %d (image only, maxUnavailable 100%%)", b.size.inPlace)
	lim, gl, ps, dep, sts, kr := res["limit"], res["gated-limit"], res["podset"], res["replicaset"], res["statefulset"], res["kruise"]
	var rows []row
	if lim != nil {
		rows = append(rows, b.limitRow(title, id, lim))
	}
	if gl != nil {
		r := measuredRow(title, newGatedLimit(b, slices.Max(b.size.workers)).label(), gl)
		r.check = "reference for the API server's CPU per pod; " + ratioOnly("podset / gated limit", ps, gl)
		rows = append(rows, r)
	}
	if ps != nil {
		// The limit neither drains nor waits for a kubelet: the operator's
		// time is judged against the gated limit, which sends the same
		// writes with the same waits.
		r := measuredRow(title, "podset", ps)
		if gl != nil {
			r.check, r.target, r.result = ratioCheck("podset / gated limit", ps, gl, 1.5, false)
			if lim != nil {
				r.check += "; " + ratioOnly("podset / limit", ps, lim) + " (the limit neither drains nor waits for the kubelet)"
			}
		} else {
			r.check = ratioOnly("podset / limit", ps, lim)
		}
		rows = append(rows, r)
	}
	if dep != nil {
		// No target: on kwok a pod's creation costs nothing, so the
		// Deployment's recreation is faster than an update in place can
		// be (see the limit's ratio).
		r := measuredRow(title, "replicaset (Deployment)", dep)
		r.check = ratioOnly("podset / deployment", ps, dep) + " (no target on kwok, where a pod's creation is free"
		if lim != nil && !lim.skipped {
			r.check += "; " + ratioOnly("limit / deployment", lim, dep)
		}
		r.check += ")"
		rows = append(rows, r)
	}
	if sts != nil {
		r := measuredRow(title, "statefulset (Parallel)", sts)
		r.check = ratioOnly("podset / statefulset", ps, sts)
		rows = append(rows, r)
	}
	if kr != nil {
		r := measuredRow(title, "kruise (CloneSet, in place)", kr)
		r.check = ratioOnly("podset / kruise", ps, kr)
		rows = append(rows, r)
	}
	if ps != nil && gl != nil {
		rows = append(rows, apiCPURow(title, ps, gl))
	}
	if ps != nil && ps.err == nil && !ps.skipped {
		n, c := int(b.size.inPlace), ps.counts
		writes := c.podCreates - c.podPosts
		r := row{scenario: title, contender: "podset"}
		r.check = fmt.Sprintf("pod writes %d for N = %d pods; %d created, %d deleted, %d bound, %d recreated (new UID)",
			writes, n, c.podPosts, c.podDeletes, c.bindings, ps.recreated)
		r.target = "= N, none replaced"
		r.result = metStr(writes == n && c.podPosts == 0 && c.podDeletes == 0 && c.bindings == 0 && ps.recreated == 0)
		rows = append(rows, r)
	}
	first := true
	for _, x := range []struct {
		name, label string
		m           *measurement
	}{
		{"limit", "limit", lim}, {"gated-limit", "gated limit", gl}, {"podset", "podset", ps},
		{"replicaset", "replicaset (Deployment)", dep}, {"statefulset", "statefulset (Parallel)", sts}, {"kruise", "kruise (CloneSet, in place)", kr},
	} {
		if x.m == nil || x.m.err != nil || x.m.skipped {
			continue
		}
		if first {
			rows = append(rows, row{scenario: title, contender: "—", check: inPlaceWritesSource + ":", target: "—", result: "—"})
			first = false
		}
		rows = append(rows, row{scenario: title, contender: x.label, check: inPlaceWrites(x.name, x.m), target: "—", result: "—"})
	}
	return rows
}

// apiCPURow compares the operator's kube-apiserver CPU per in-place pod
// with the gated limit's.
func apiCPURow(title string, ps, gl *measurement) row {
	r := row{scenario: title, contender: "podset", target: "≤ 1.2", result: "missed"}
	per := func(m *measurement) (time.Duration, bool) {
		if m == nil || m.skipped || m.err != nil || m.cutoff || !m.cpu.ok || m.pods <= 0 {
			return 0, false
		}
		return m.cpu.api / time.Duration(m.pods), true
	}
	a, okA := per(ps)
	g, okG := per(gl)
	if !okA || !okG || g <= 0 {
		r.check = "kube-apiserver CPU per in-place pod: podset / gated limit = —"
		if okA && okG {
			r.check += " (the gated limit's is below the clock tick: too few pods)"
		}
		return r
	}
	ratio := a.Seconds() / g.Seconds()
	r.check = fmt.Sprintf("kube-apiserver CPU per in-place pod: podset %.2f ms, gated limit %.2f ms (%.2f s and %.2f s per 1000 pods): podset / gated limit = %.2f",
		a.Seconds()*1000, g.Seconds()*1000, a.Seconds()*1000, g.Seconds()*1000, ratio)
	r.result = metStr(ratio <= 1.2)
	return r
}

// ratioOnly is the ratio a / b, for a comparison without a target.
func ratioOnly(label string, a, b *measurement) string {
	check, _, _ := ratioCheck(label, a, b, 0, false)
	return check
}

// ratioCheck compares a / b against a bound: at most (or, with atLeast, at
// least) bound. A contender that timed out still gives a bound on the ratio.
func ratioCheck(label string, a, b *measurement, bound float64, atLeast bool) (check, target, result string) {
	target = fmt.Sprintf("≤ %g", bound)
	if atLeast {
		target = fmt.Sprintf("≥ %g", bound)
	}
	if a != nil && a.skipped {
		return "—", target, "—"
	}
	if a == nil || b == nil || b.err != nil || b.cutoff || b.skipped || b.dur <= 0 || a.err != nil {
		return label + " = —", target, "missed"
	}
	ratio := a.dur.Seconds() / b.dur.Seconds()
	if a.cutoff { // the true ratio is larger
		return fmt.Sprintf("%s > %.1f", label, ratio), target, metStr(atLeast && ratio >= bound)
	}
	ok := ratio <= bound
	if atLeast {
		ok = ratio >= bound
	}
	return fmt.Sprintf("%s = %.2f", label, ratio), target, metStr(ok)
}

func (b *bench) convergedRows() []row {
	title := fmt.Sprintf("converged pass (%d x %d, one pod label touched per set)", b.size.reactionSets, b.size.reactionReplicas)
	var rows []row
	for _, name := range []string{"podset (in-process)", "replicaset", "tutorial"} {
		res := b.reaction[name]
		if res == nil || res.converged == nil {
			continue
		}
		c := res.converged.counts
		r := row{scenario: title, contender: name, measured: "", podWrites: fmt.Sprintf("%d + %d", c.podCreates, c.podDeletes),
			statusWrites: fmt.Sprint(c.statusWrites), podGets: fmt.Sprint(c.podGets), check: "—", target: "—", result: "—"}
		switch {
		case res.passes >= 0:
			r.measured = fmt.Sprintf("%d passes for %d touches", res.passes, res.touches)
		default:
			r.measured = fmt.Sprintf("%d touches", res.touches)
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

func (b *bench) reactionRows() []row {
	title := fmt.Sprintf("reaction: replicas +1 → first pod write (%d trials)", b.size.trials)
	var rows []row
	add := func(name, how string, d []time.Duration, targeted bool) {
		if len(d) == 0 {
			return
		}
		p99 := percentile(d, 99)
		r := row{scenario: title, contender: name, measured: fmt.Sprintf("p50 %s, p99 %s", fmtMs(percentile(d, 50)), fmtMs(p99)),
			check: how, target: "—", result: "—"}
		if targeted {
			r.target, r.result = "p99 ≤ 20 ms", metStr(p99 <= 20*time.Millisecond)
		}
		rows = append(rows, r)
	}
	if res := b.reaction["podset (in-process)"]; res != nil {
		add("podset (in-process)", "first pod write at the operator's transport", res.transport, true)
		add("podset (in-process)", "first ADDED pod event on a watch", res.watch, false)
	}
	for _, name := range []string{"replicaset", "tutorial"} {
		if res := b.reaction[name]; res != nil {
			add(name, "first ADDED pod event on a watch", res.watch, false)
		}
	}
	for i := range rows {
		rows[i].podWrites, rows[i].statusWrites, rows[i].podGets = "—", "—", "—"
	}
	return rows
}

func (b *bench) memoryRows() []row {
	m := b.memory
	if m == nil {
		return nil
	}
	title := "memory: Go heap after GC, above the heap before the manager started"
	r := func(contender, measured, check, target string, ok bool) row {
		return row{scenario: title, contender: contender, measured: measured, podWrites: "—", statusWrites: "—", podGets: "—",
			check: check, target: target, result: metStr(ok)}
	}
	if m.err != nil {
		return []row{{scenario: title, contender: "podset (in-process)", measured: "failed: " + shortErr(m.err), podWrites: "—", statusWrites: "—", podGets: "—", check: "—", target: "—", result: "missed"}}
	}
	const kib = 1024.0
	p1, p2 := m.perPod(m.h1, m.n1), m.perPod(m.h2, m.n2)
	marginal := (float64(m.h2) - float64(m.h1)) / float64(m.n2-m.n1)
	growth := m.unrelatedGrowth()
	return []row{
		r("podset (in-process)", fmt.Sprintf("%.1f MiB", (float64(m.h1)-float64(m.base))/kib/kib),
			fmt.Sprintf("%d managed pods: %.2f KiB per pod", m.n1, p1/kib), "≤ 4 KiB per pod", p1 <= 4*kib),
		r("podset (in-process)", fmt.Sprintf("%.1f MiB", (float64(m.h2)-float64(m.base))/kib/kib),
			fmt.Sprintf("%d managed pods: %.2f KiB per pod (%.2f KiB per pod from %d to %d)", m.n2, p2/kib, marginal/kib, m.n1, m.n2), "≤ 4 KiB per pod", p2 <= 4*kib),
		r("podset (in-process)", fmt.Sprintf("%+.2f MiB", (float64(m.h3)-float64(m.h2))/kib/kib),
			fmt.Sprintf("+%d unrelated pods: %+.2f%%", m.unrelated, 100*growth), "< 5%", growth < 0.05),
	}
}

func metStr(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func fmtDur(d time.Duration) string {
	if d < time.Second {
		return fmtMs(d)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}

// scaleRows are the rows of the scale scenario: K x N to Ready for each
// contender, the operator's peak heap, and its restart and leader change.
func (b *bench) scaleRows() []row {
	sr := b.scale
	if sr == nil {
		return nil
	}
	id := "scale " + convID(sr.k, sr.n)
	pods := int(sr.k * sr.n)
	rows := b.timedRows(id+" → ready", id, pods, true)
	if sr.peakHeap > 0 {
		perPod := float64(sr.peakHeap) / 1024 / float64(pods)
		rows = append(rows, row{scenario: id + " → ready", contender: "podset",
			measured: fmt.Sprintf("peak heap %s, peak RSS %s", mib(sr.peakHeap), mib(sr.peakRSS)),
			check:    fmt.Sprintf("peak heap in use (sampled HeapAlloc, garbage included) per pod: %.2f KiB", perPod),
			target:   "≤ 4 KiB per pod", result: metStr(perPod <= 4)})
	}
	for _, x := range []struct {
		title string
		r     *restartResult
	}{{"operator restart over " + convID(sr.k, sr.n), sr.restart}, {"leader change over " + convID(sr.k, sr.n), sr.leader}} {
		if x.r == nil {
			continue
		}
		r := row{scenario: x.title, contender: "podset", podWrites: "—", statusWrites: "—", podGets: "—"}
		if x.r.err != nil {
			r.measured, r.check, r.target, r.result = "failed: "+shortErr(x.r.err), "—", "—", "missed"
			rows = append(rows, r)
			continue
		}
		c := x.r.requests
		r.measured = fmt.Sprintf("first full pass after %s (workers after %s), peak heap %s", fmtDur(x.r.pass), fmtDur(x.r.sync), mib(x.r.peakHeap))
		r.podWrites = fmt.Sprintf("%d + %d", c.podCreates, c.podDeletes)
		r.statusWrites = fmt.Sprint(c.statusWrites)
		r.podGets = fmt.Sprint(c.podGets)
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
