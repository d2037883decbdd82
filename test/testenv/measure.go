package testenv

import (
	"bufio"
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// What the benchmark (test/bench) and the real-node suite (test/node)
// measure with: kube-apiserver's request counters, percentiles of
// durations, and a watch whose every event is timed by its handler.

// RequestKey is one series of kube-apiserver's apiserver_request_total,
// or, with Seconds set, of apiserver_request_duration_seconds_sum (the
// time the API server spent answering, summed).
type RequestKey struct {
	Verb, Group, Resource, Subresource, Code string
	Seconds                                  bool
}

// Requests is a snapshot of apiserver_request_total (and of the time
// spent answering).
type Requests map[RequestKey]float64

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ParseRequests reads the request counters out of kube-apiserver's
// /metrics.
func ParseRequests(metrics []byte) (Requests, error) {
	r := Requests{}
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		total := strings.HasPrefix(line, "apiserver_request_total{")
		if !total && !strings.HasPrefix(line, "apiserver_request_duration_seconds_sum{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		k := RequestKey{Seconds: !total}
		for _, m := range labelRE.FindAllStringSubmatch(line[:end], -1) {
			switch m[1] {
			case "verb":
				k.Verb = m[2]
			case "group":
				k.Group = m[2]
			case "resource":
				k.Resource = m[2]
			case "subresource":
				k.Subresource = m[2]
			case "code":
				k.Code = m[2]
			}
		}
		r[k] += v
	}
	return r, sc.Err()
}

// Sub is the requests sent between two snapshots.
func (r Requests) Sub(before Requests) Requests {
	d := Requests{}
	for k, v := range r {
		if dv := v - before[k]; dv != 0 {
			d[k] = dv
		}
	}
	return d
}

// Count sums the request counts that match.
func (r Requests) Count(match func(k RequestKey) bool) int {
	n := 0.0
	for k, v := range r {
		if !k.Seconds && match(k) {
			n += v
		}
	}
	return int(n + 0.5)
}

// IsWrite reports whether a request of this verb writes.
func IsWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		return true
	}
	return false
}

// Percentile is the nearest-rank percentile p (0 to 100) of the samples,
// zero for none. It leaves the samples as they are.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// PodEvents is a WatchEvents handler that hands handle each pod event
// with the time it arrived: the timelines of the real-node suite.
func PodEvents(handle func(typ watch.EventType, pod *corev1.Pod, at time.Time)) func(watch.Event) {
	return func(ev watch.Event) {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			handle(ev.Type, p, time.Now())
		}
	}
}

// WatchEvents starts a watch with start and hands each of its events to
// handle, in order, until the returned stop is called (it waits for the
// last one). A watch the API server ends (it stopped, or restarted) is
// started again as soon as the server answers; the new watch begins with
// an ADDED event for every object, its state then. It returns start's
// first error.
func WatchEvents(ctx context.Context, start func(context.Context) (watch.Interface, error), handle func(watch.Event)) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := start(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for ev := range w.ResultChan() {
				handle(ev)
			}
			w.Stop()
			for w = nil; w == nil; {
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				if again, err := start(ctx); err == nil {
					w = again
				}
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}
