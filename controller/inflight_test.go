package controller

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blockingServer answers every request once release is closed, and counts
// the requests it holds at once.
type blockingServer struct {
	*httptest.Server
	release chan struct{}
	once    sync.Once
	now     atomic.Int32
	total   atomic.Int32
	mu      sync.Mutex
	most    int32
	order   []string
}

func newBlockingServer(t *testing.T) *blockingServer {
	s := &blockingServer{release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.order = append(s.order, r.URL.Path)
		s.most = max(s.most, s.now.Add(1))
		s.mu.Unlock()
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

// free answers the requests held, and every request after them.
func (s *blockingServer) free() { s.once.Do(func() { close(s.release) }) }

// answerAll frees the requests held, waits for the requests sent (wg), and
// fails the test on any of their errors.
func (s *blockingServer) answerAll(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	s.free()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// limitedClient is an HTTP client over limitInFlight(n), as the pod client's.
func limitedClient(n int) *http.Client {
	return &http.Client{Transport: limitInFlight(http.DefaultTransport, n)}
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

func TestPodWritesInFlightBounded(t *testing.T) {
	s := newBlockingServer(t)
	c := limitedClient(3)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() { errs <- get(t.Context(), c, s.URL+"/api/v1/pods") })
	}
	// While three requests are held, the other seven wait in the client.
	waitFor(t, "three requests held", func() bool { return s.now.Load() == 3 })
	time.Sleep(50 * time.Millisecond)
	if n := s.now.Load(); n != 3 {
		t.Fatalf("%d requests reached the server at once, want 3", n)
	}
	s.answerAll(t, &wg, errs)
	if most, total := s.most, s.total.Load(); most != 3 || total != 10 {
		t.Fatalf("at most %d in flight, %d answered: want 3, 10", most, total)
	}
}

func TestPodWritesInFlightWaitEndsWithItsContext(t *testing.T) {
	s := newBlockingServer(t)
	c := limitedClient(1)
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

func TestPodWritesInFlightFailedRequestFreesItsSlot(t *testing.T) {
	c := limitedClient(1)
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := get(ctx, c, "http://127.0.0.1:1/refused")
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a request to a closed port: %v, want it refused at once, not waiting for a slot", err)
		}
	}
}

func TestPodWritesInFlightUrgentFirst(t *testing.T) {
	s := newBlockingServer(t)
	c := limitedClient(1)
	l := c.Transport.(*limitedTransport).l
	queued := func(urgent, waiting int) func() bool {
		return func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return len(l.urgent) == urgent && len(l.waiting) == waiting
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	send := func(ctx context.Context, path string) { wg.Go(func() { errs <- get(ctx, c, s.URL+path) }) }
	send(t.Context(), "/held")
	waitFor(t, "the request held", func() bool { return s.now.Load() == 1 })
	send(t.Context(), "/create-1")
	waitFor(t, "a create waiting", queued(0, 1))
	send(t.Context(), "/create-2")
	waitFor(t, "two creates waiting", queued(0, 2))
	send(withUrgency(t.Context()), "/gate")
	waitFor(t, "the gate waiting", queued(1, 2))

	s.answerAll(t, &wg, errs)
	want := []string{"/held", "/gate", "/create-1", "/create-2"}
	if !slices.Equal(s.order, want) {
		t.Fatalf("the server saw %v, want %v: the gate first of those waiting, then the creates in order", s.order, want)
	}
}
