package main

import (
	"fmt"
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

// table renders the scenarios' results as one markdown table.
func (b *bench) table(results []result) string {
	var rows []row
	for _, r := range results {
		rows = append(rows, r.rows(b)...)
	}
	rows = append(rows, repeats(results)...)

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
func (b *bench) timedRows(title string, res *timedResult, newPods int, requestTargets bool) []row {
	if res.empty() {
		return nil
	}
	id := res.id
	lim, ps, rs, sts, kr, tut := res.limit, res.podset, res.replicaset, res.statefulset, res.kruise, res.tutorial
	var rows []row
	if lim != nil {
		rows = append(rows, b.limitRow(title, res))
	}
	rsName := "replicaset"
	if strings.HasPrefix(id, "rollout") {
		rsName = "replicaset (Deployment)"
	}
	// Each contender's row with its ratio: to the limit for podset, to
	// podset for the others, a target where bound is above zero. The
	// tutorial is a reference: on this cluster it is only 2 to 2.5 times
	// slower than the limit, so no ratio to podset is a target.
	for _, x := range []struct {
		name, ratio string
		m, a, b     *measurement
		bound       float64
	}{
		{"podset", "podset / limit", ps, ps, lim, limitBound},
		{rsName, "podset / replicaset", rs, ps, rs, replicaSetBound(id, title, requestTargets)},
		{"statefulset (Parallel)", "podset / statefulset", sts, ps, sts, statefulSetBound},
		{"kruise (CloneSet)", "podset / kruise", kr, ps, kr, 0},
		{"tutorial", "tutorial / podset", tut, tut, ps, 0},
	} {
		if x.m == nil {
			continue
		}
		r := measuredRow(title, x.name, x.m)
		if x.bound > 0 {
			r.check, r.target, r.result = ratioCheck(x.ratio, x.a, x.b, x.bound, false)
		} else {
			r.check = ratioOnly(x.ratio, x.a, x.b)
		}
		rows = append(rows, r)
	}
	if tut == nil && strings.HasPrefix(id, "rollout") {
		r := measuredRow(title, "tutorial", nil)
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

// The targets of the ratios the tables share with the medians of repeated
// shapes (repeats): podset's time against the limit's and the
// StatefulSet's, the API server's CPU per pod and the controllers' CPU
// against ReplicaSet's (issue 39).
const (
	limitBound         = 1.1
	statefulSetBound   = 1.0
	apiCPUBound        = 1.25
	controllerCPUBound = 1.0
)

// replicaSetBound is the target of podset / replicaset in a scenario, or
// 0 for none. Creating pods (growth, 0 -> N): every pod carries the
// readiness gate, whatever its podUpdatePolicy, so what the one more
// write per pod costs and no more (1.15), except for 1000 x 1,
// where each set's revision and custom-resource status write are measured
// against StatefulSet, which pays both too. A scale-down of pods no
// Service selects: 1.15 (issue 39), since nothing routes to them and so
// nothing drains, but each set still writes its status as a custom
// resource. Everything else (the rollout): 1.0.
// The scale-downs are told by their row's title, which ends in "(pods
// gone)"; their id is that of the scale ("scale 1000 -> 100").
func replicaSetBound(id, title string, growth bool) float64 {
	switch {
	case strings.HasSuffix(title, "(pods gone)"):
		return 1.15
	case !growth:
		return 1.0
	case strings.HasSuffix(id, " x 1"):
		return 0
	}
	return 1.15
}

// dashRow is a row of a scenario and contender with "—" in every other
// column.
func dashRow(title, contender string) row {
	return row{scenario: title, contender: contender, measured: "—", podWrites: "—", statusWrites: "—", podGets: "—", check: "—", target: "—", result: "—"}
}

// measuredRow is the row of one contender's timed measurement.
func measuredRow(title, name string, m *measurement) row {
	r := dashRow(title, name)
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
	r.setCounts(m.counts)
	r.cpu = cpuPer1000(m)
	return r
}

// setCounts fills the request-count columns.
func (r *row) setCounts(c counts) {
	r.podWrites = fmt.Sprintf("%d + %d", c.podCreates, c.podDeletes)
	r.statusWrites = fmt.Sprint(c.statusWrites)
	r.podGets = fmt.Sprint(c.podGets)
}

// limitRow is the limit's row: the best of its worker counts.
func (b *bench) limitRow(title string, res *timedResult) row {
	lim := res.limit
	loops := "apply, create"
	if res.apply == nil || res.create == nil {
		loops = "apply loop only"
	}
	name := fmt.Sprintf("limit (best: %s; %s)", res.limitBest, loops)
	if lim.skipped {
		name = "limit"
	}
	r := measuredRow(title, name, lim)
	var ws []string
	for _, w := range b.size.workers {
		ws = append(ws, fmt.Sprint(w))
	}
	r.check = "reference (best of W = " + strings.Join(ws, ", ") + ": " + res.limitLoopsSummary() + ")"
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
