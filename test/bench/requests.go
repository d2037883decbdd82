package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// What a run cost the API server: kube-apiserver's own request counters,
// read before and after each measured window.

// requestKey and requests are testenv's: kube-apiserver's request
// counters, parsed.
type (
	requestKey = testenv.RequestKey
	requests   = testenv.Requests
)

// scrape reads kube-apiserver's /metrics with the admin credentials.
func (c *cluster) scrape(ctx context.Context) (requests, error) {
	data, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping kube-apiserver /metrics: %w", err)
	}
	return testenv.ParseRequests(data)
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

// isPod reports whether a request is to pods, on that subresource ("" for
// the pod itself).
func isPod(k requestKey, subresource string) bool {
	return k.Group == "" && k.Resource == "pods" && k.Subresource == subresource
}

func countsOf(r requests) counts {
	c := counts{
		podCreates: r.Count(func(k requestKey) bool { return isPod(k, "") && testenv.IsWrite(k.Verb) && k.Verb != "DELETE" }),
		podPosts:   r.Count(func(k requestKey) bool { return isPod(k, "") && k.Verb == "POST" }),
		podDeletes: r.Count(func(k requestKey) bool { return isPod(k, "") && k.Verb == "DELETE" && strings.HasPrefix(k.Code, "2") }),
		statusWrites: r.Count(func(k requestKey) bool {
			return k.Subresource == "status" && testenv.IsWrite(k.Verb) &&
				(k.Group == podsetv1alpha1.GroupVersion.Group && k.Resource == "podsets" ||
					k.Group == "apps" && (k.Resource == "replicasets" || k.Resource == "deployments" || k.Resource == "statefulsets"))
		}),
		podGets:   r.Count(func(k requestKey) bool { return isPod(k, "") && k.Verb == "GET" }),
		podStatus: r.Count(func(k requestKey) bool { return isPod(k, "status") && testenv.IsWrite(k.Verb) }),
		bindings:  r.Count(func(k requestKey) bool { return isPod(k, "binding") }),
	}
	refused, other := map[string]int{}, map[string]int{}
	for k, v := range r {
		switch {
		case k.Seconds || !testenv.IsWrite(k.Verb):
		case isPod(k, "status") && !strings.HasPrefix(k.Code, "2"):
			refused[k.Code] += int(v)
		case (k.Group != "" || k.Resource != "pods") && k.Subresource != "status":
			// Everything else that wrote, for the log.
			other[requestName(k)] += int(v)
		}
	}
	c.statusRefused, c.other = joinCounts(refused), joinCounts(other)
	c.time = timeByRequest(r)
	return c
}

// requestName is a request's "VERB group/resource/subresource".
func requestName(k requestKey) string {
	return k.Verb + " " + strings.Trim(k.Group+"/"+k.Resource+"/"+k.Subresource, "/")
}

// joinCounts is "key=n" for each key, sorted, space-separated.
func joinCounts(m map[string]int) string {
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// timeByRequest is the API server's time answering writes, by verb and
// resource, largest first: "APPLY pods 4.21 s (1000, 4.2 ms each), ...".
// Watches and the reads of informers are left out: they last as long as
// they are open.
func timeByRequest(r requests) string {
	type item struct {
		what    string
		seconds float64
		n       int
	}
	by := map[string]*item{}
	for k, v := range r {
		if !testenv.IsWrite(k.Verb) {
			continue
		}
		what := requestName(k)
		it := by[what]
		if it == nil {
			it = &item{what: what}
			by[what] = it
		}
		if k.Seconds {
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
