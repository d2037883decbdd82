package main

import (
	"net/http"
	"regexp"
	"sync"
	"time"
)

// podPath matches a pod or the pods of a namespace, without subresource.
var podPath = regexp.MustCompile(`^/api/v1/namespaces/[^/]+/pods(/[^/]+)?$`)

// recorder wraps the in-process operator's HTTP transport: it timestamps
// every pod write the moment it is handed to the transport, and counts pod
// writes and pod GETs.
type recorder struct {
	mu        sync.Mutex
	podWrites []time.Time
	podGets   int
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if podPath.MatchString(req.URL.Path) {
			now := time.Now()
			r.mu.Lock()
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				r.podWrites = append(r.podWrites, now)
			case http.MethodGet:
				if req.URL.Query().Get("watch") == "" {
					r.podGets++
				}
			}
			r.mu.Unlock()
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

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
