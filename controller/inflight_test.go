package controller

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// blockingServer answers every request once release is closed, and counts
// the requests it holds at once, watches apart.
type blockingServer struct {
	*httptest.Server
	release        chan struct{}
	once           sync.Once
	now, most      atomic.Int32
	watches, total atomic.Int32
}

func newBlockingServer(t *testing.T) *blockingServer {
	s := &blockingServer{release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWatch(r) {
			s.watches.Add(1)
			_, _ = io.WriteString(w, "watch")
			return
		}
		n := s.now.Add(1)
		for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
		}
		<-s.release
		s.now.Add(-1)
		s.total.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	// Before the server closes (cleanups run last first): a test that
	// failed with requests held lets them go.
	t.Cleanup(s.free)
	return s
}

// client is an HTTP client made as the manager makes its own, from a
// rest.Config that limitRequestsInFlight bounded to n.
// free answers the requests held, and every request after them.
func (s *blockingServer) free() { s.once.Do(func() { close(s.release) }) }

func (s *blockingServer) client(t *testing.T, n int) *http.Client {
	c, err := rest.HTTPClientFor(limitRequestsInFlight(&rest.Config{Host: s.URL}, n))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.ReadAll(resp.Body)
	return errors.Join(err, resp.Body.Close())
}

func TestRequestsInFlightBounded(t *testing.T) {
	s := newBlockingServer(t)
	c := s.client(t, 3)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() { errs <- get(t.Context(), c, s.URL+"/api/v1/pods") })
	}
	// While three requests are held, the other seven wait in the client;
	// a watch is not held back by them.
	waitFor(t, "three requests held", func() bool { return s.now.Load() == 3 })
	if err := get(t.Context(), c, s.URL+"/api/v1/pods?watch=true"); err != nil {
		t.Fatalf("a watch while the slots are taken: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := s.now.Load(); n != 3 {
		t.Fatalf("%d requests reached the server at once, want 3", n)
	}
	s.free()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if most, total, watches := s.most.Load(), s.total.Load(), s.watches.Load(); most != 3 || total != 10 || watches != 1 {
		t.Fatalf("at most %d in flight, %d answered, %d watches: want 3, 10, 1", most, total, watches)
	}
}

func TestRequestsInFlightWaitEndsWithItsContext(t *testing.T) {
	s := newBlockingServer(t)
	c := s.client(t, 1)
	held := make(chan error, 1)
	go func() { held <- get(t.Context(), c, s.URL+"/held") }()
	waitFor(t, "the request held", func() bool { return s.now.Load() == 1 })

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := get(ctx, c, s.URL+"/waiting"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request waiting for a slot past its deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	// The slot comes back once the held request's body is closed.
	s.free()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := get(t.Context(), c, s.URL+"/after"); err != nil {
		t.Fatalf("a request once the slot is free: %v", err)
	}
}

func TestRequestsInFlightFailedRequestFreesItsSlot(t *testing.T) {
	c, err := rest.HTTPClientFor(limitRequestsInFlight(&rest.Config{Host: "http://127.0.0.1:1"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := get(ctx, c, "http://127.0.0.1:1/refused")
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a request to a closed port: %v, want it refused at once, not waiting for a slot", err)
		}
	}
}
