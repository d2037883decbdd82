package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// -trace (config.trace) runs the operator with --log-level debug in the
// convergence scenarios and prints one PodSet's timeline after each: its
// passes (from the operator's debug log: when each began, how long it
// took, what it wrote, what became of the status) between the pods'
// Ready events as the benchmark's watch saw them. Off by default, so the
// timed runs are not slowed by the debug log.

// passLine is the operator's debug log line of one pass (controller.logPass).
type passLine struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Began     string `json:"began"`
	Took      string `json:"took"`
	Pods      int    `json:"pods"`
	Create    int    `json:"create"`
	Delete    int    `json:"delete"`
	Update    int    `json:"update"`
	Repair    int    `json:"repair"`
	Gates     int    `json:"gates"`
	Status    string `json:"status"`
	Ready     int    `json:"ready"`
}

// traceSet prints the timeline of set in ns from start, reading the
// operator's log at logFile, and writes it to a file next to it.
func (b *bench) traceSet(id, ns, set, logFile string, start time.Time) {
	type entry struct {
		at   time.Duration
		what string
	}
	var entries []entry
	f, err := os.Open(logFile)
	if err != nil {
		logf("trace: %v", err)
		return
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	passes := 0
	for sc.Scan() {
		var l passLine
		if !strings.Contains(sc.Text(), `"msg":"pass"`) || json.Unmarshal(sc.Bytes(), &l) != nil || l.Namespace != ns || l.Name != set {
			continue
		}
		began, err1 := time.Parse(time.RFC3339Nano, l.Began)
		took, err2 := time.ParseDuration(l.Took)
		if err1 != nil || err2 != nil || began.Before(start) {
			continue
		}
		passes++
		var did []string
		for _, x := range []struct {
			n    int
			what string
		}{{l.Create, "create"}, {l.Delete, "delete"}, {l.Update, "update"}, {l.Repair, "repair"}, {l.Gates, "gate"}} {
			if x.n > 0 {
				did = append(did, fmt.Sprintf("%s %d", x.what, x.n))
			}
		}
		if len(did) == 0 {
			did = append(did, "no pod write")
		}
		entries = append(entries, entry{began.Sub(start), fmt.Sprintf("pass %d began, took %s over %d pods (%d ready): %s; status %s",
			passes, fmtDur(took), l.Pods, l.Ready, strings.Join(did, ", "), l.Status)})
	}
	b.obs.read(func(s *state) {
		for _, p := range s.pods {
			if p.ns == ns && p.set == set && p.ready && !p.readyAt.Before(start) {
				entries = append(entries, entry{p.readyAt.Sub(start), "pod " + p.name + " Ready (the benchmark's watch)"})
			}
		}
		if ps, ok := s.podsets[ns+"/"+set]; ok && ps.readyCondition {
			entries = append(entries, entry{-1, fmt.Sprintf("(the PodSet's status now: Ready, %d ready pods)", ps.ready)})
		}
	})
	slices.SortStableFunc(entries, func(a, b entry) int { return int(a.at - b.at) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "trace of PodSet %s in %s (%s), times from the trigger; %d passes:\n", set, id, ns, passes)
	for _, e := range entries {
		if e.at < 0 {
			continue
		}
		fmt.Fprintf(&sb, "  +%8.3f s  %s\n", e.at.Seconds(), e.what)
	}
	logf("%s", strings.TrimRight(sb.String(), "\n"))
	path := logPath(b.logDir, "trace-"+strings.ReplaceAll(id, " ", ""))
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		logf("trace: %v", err)
	}
}
