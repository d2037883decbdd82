package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// What a run cost the API server: kube-apiserver's own request counters,
// read before and after each measured window.

// requestKey is one series of kube-apiserver's apiserver_request_total,
// or, with seconds set, of apiserver_request_duration_seconds_sum (the
// time the API server spent answering, summed).
type requestKey struct {
	verb, group, resource, subresource, code string
	seconds                                  bool
}

// requests is a snapshot of apiserver_request_total.
type requests map[requestKey]float64

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// scrape reads kube-apiserver's /metrics with the admin credentials.
func (c *cluster) scrape(ctx context.Context) (requests, error) {
	data, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping kube-apiserver /metrics: %w", err)
	}
	r := requests{}
	sc := bufio.NewScanner(bytes.NewReader(data))
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
		k := requestKey{seconds: !total}
		for _, m := range labelRE.FindAllStringSubmatch(line[:end], -1) {
			switch m[1] {
			case "verb":
				k.verb = m[2]
			case "group":
				k.group = m[2]
			case "resource":
				k.resource = m[2]
			case "subresource":
				k.subresource = m[2]
			case "code":
				k.code = m[2]
			}
		}
		r[k] += v
	}
	return r, sc.Err()
}

// sub is the requests sent between two snapshots.
func (r requests) sub(before requests) requests {
	d := requests{}
	for k, v := range r {
		if dv := v - before[k]; dv != 0 {
			d[k] = dv
		}
	}
	return d
}

// count sums the request counts that match.
func (r requests) count(match func(k requestKey) bool) int {
	n := 0.0
	for k, v := range r {
		if !k.seconds && match(k) {
			n += v
		}
	}
	return int(n + 0.5)
}

func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		return true
	}
	return false
}

// counts is what one run cost the API server.
type counts struct {
	podCreates   int // POST, PUT, PATCH and APPLY on pods (no subresource)
	podPosts     int // the POSTs among podCreates: new pods
	podDeletes   int // successful DELETEs on pods; includes kwok's own final delete of each pod
	statusWrites int // writes to podsets/status, replicasets/status, deployments/status, statefulsets/status
	podGets      int // GET on pods: reads that bypass any cache
	// podStatus is the writes to pods/status: kwok's fake kubelet's
	// patches, and the readiness gate's (the operator's, or the limit's:
	// one per pod created, one per gate closed).
	podStatus int
	// statusRefused is how many of the pods/status writes the API server
	// refused, by code ("409=386"): a patch that carries a
	// resourceVersion fails when another write came first, and is sent
	// again.
	statusRefused string
	bindings      int // pods/binding: the scheduler
	other         string
	// time is the API server's time answering writes, by request
	// (timeByRequest).
	time string
}

func (r requests) counts() counts {
	pods := func(k requestKey) bool { return k.group == "" && k.resource == "pods" }
	c := counts{
		podCreates: r.count(func(k requestKey) bool {
			return pods(k) && k.subresource == "" && isWrite(k.verb) && k.verb != "DELETE"
		}),
		podPosts: r.count(func(k requestKey) bool { return pods(k) && k.subresource == "" && k.verb == "POST" }),
		podDeletes: r.count(func(k requestKey) bool {
			return pods(k) && k.subresource == "" && k.verb == "DELETE" && strings.HasPrefix(k.code, "2")
		}),
		statusWrites: r.count(func(k requestKey) bool {
			return k.subresource == "status" && isWrite(k.verb) &&
				(k.group == podsetv1alpha1.GroupVersion.Group && k.resource == "podsets" ||
					k.group == "apps" && (k.resource == "replicasets" || k.resource == "deployments" || k.resource == "statefulsets"))
		}),
		podGets:   r.count(func(k requestKey) bool { return pods(k) && k.subresource == "" && k.verb == "GET" }),
		podStatus: r.count(func(k requestKey) bool { return pods(k) && k.subresource == "status" && isWrite(k.verb) }),
		bindings:  r.count(func(k requestKey) bool { return pods(k) && k.subresource == "binding" }),
	}
	refused := map[string]int{}
	for k, v := range r {
		if !k.seconds && pods(k) && k.subresource == "status" && isWrite(k.verb) && !strings.HasPrefix(k.code, "2") {
			refused[k.code] += int(v)
		}
	}
	var codes []string
	for code, n := range refused {
		codes = append(codes, fmt.Sprintf("%s=%d", code, n))
	}
	c.statusRefused = strings.Join(sortStrings(codes), " ")
	// Everything else that wrote, for the log.
	other := map[string]int{}
	for k, v := range r {
		if !k.seconds && isWrite(k.verb) && (k.group != "" || k.resource != "pods") && k.subresource != "status" {
			other[k.verb+" "+strings.Trim(k.group+"/"+k.resource+"/"+k.subresource, "/")] += int(v)
		}
	}
	var parts []string
	for k, v := range other {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	c.other = strings.Join(sortStrings(parts), " ")
	c.time = r.timeByRequest()
	return c
}

// timeByRequest is the API server's time answering writes, by verb and
// resource, largest first: "APPLY pods 4.21 s (1000, 4.2 ms each), ...".
// Watches and the reads of informers are left out: they last as long as
// they are open.
func (r requests) timeByRequest() string {
	type item struct {
		what    string
		seconds float64
		n       int
	}
	by := map[string]*item{}
	for k, v := range r {
		if !isWrite(k.verb) {
			continue
		}
		what := k.verb + " " + strings.Trim(k.group+"/"+k.resource+"/"+k.subresource, "/")
		it := by[what]
		if it == nil {
			it = &item{what: what}
			by[what] = it
		}
		if k.seconds {
			it.seconds += v
		} else {
			it.n += int(v + 0.5)
		}
	}
	items := make([]*item, 0, len(by))
	for _, it := range by {
		if it.seconds > 0 && it.n > 0 {
			items = append(items, it)
		}
	}
	slices.SortFunc(items, func(a, b *item) int { return cmp.Compare(b.seconds, a.seconds) })
	var parts []string
	for _, it := range items {
		parts = append(parts, fmt.Sprintf("%s %.2f s (%d, %.1f ms each)", it.what, it.seconds, it.n, 1000*it.seconds/float64(it.n)))
	}
	return strings.Join(parts, ", ")
}

func (c counts) String() string {
	return fmt.Sprintf("pod writes %d (%d POST, +%d DELETE), status writes %d, pod GETs %d; pods/status %d, kwok's and the gates' (refused: %s), bindings %d; other writes: %s; API server time on writes: %s",
		c.podCreates, c.podPosts, c.podDeletes, c.statusWrites, c.podGets, c.podStatus, cmp.Or(c.statusRefused, "none"), c.bindings, c.other, c.time)
}
