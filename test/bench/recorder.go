package main

import (
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// podPath matches a pod or the pods of a namespace, without subresource.
var podPath = regexp.MustCompile(`^/api/v1/namespaces/[^/]+/pods(/[^/]+)?$`)

// recorder wraps the in-process operator's HTTP transport: it timestamps
// every pod write the moment it is handed to the transport.
type recorder struct {
	mu        sync.Mutex
	podWrites []time.Time
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return testenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if podPath.MatchString(req.URL.Path) {
				now := time.Now()
				r.mu.Lock()
				r.podWrites = append(r.podWrites, now)
				r.mu.Unlock()
			}
		}
		return rt.RoundTrip(req)
	})
}

// firstWriteAfter is the first pod write sent after t.
func (r *recorder) firstWriteAfter(t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.podWrites {
		if w.After(t) {
			return w, true
		}
	}
	return time.Time{}, false
}
