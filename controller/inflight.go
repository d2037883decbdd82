package controller

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
)

// MaxPodWritesInFlight bounds the operator's pod writes (applies, gate
// patches, deletions) in flight at once, over all passes.
//
// kube-apiserver lets a client open 100 streams on one HTTP/2 connection
// unless --http2-max-streams-per-connection says otherwise (k8s.io/apiserver,
// SecureServingInfo). client-go's HTTP/2 transport does not wait for a free
// stream: a request that finds every stream taken dials a new connection,
// and so does every other request behind it, until one of the connections
// is added to the pool; the rest are closed again. A pass that creates a
// thousand pods sends up to Workers applies and as many gate patches at
// once, so without this bound the operator opened and closed about 160 TLS
// connections in the two seconds its writes passed 100: a client
// certificate's signature for the operator and a handshake for the API
// server each (docs/benchmarks.md). 90 leaves the operator's watches, its
// Lease, its events and its other writes their streams on the connection.
const MaxPodWritesInFlight = 90

// limitInFlight wraps rt so that at most n of its requests are in flight: a
// request beyond them waits for one to end (its answer's body closed) or for
// its context to end. A request whose context is urgent (withUrgency) takes
// the next slot that frees before any other waiting request does.
func limitInFlight(rt http.RoundTripper, n int) http.RoundTripper {
	return &limitedTransport{rt: rt, l: &inFlightLimiter{free: n}}
}

type urgentKey struct{}

// withUrgency marks the requests made with ctx as urgent: the readiness
// gate's writes. A gate that opens after the kubelet has first reported
// its pod costs the kubelet a second status write (kwok's patch is refused
// and played again), so the gate of a pod just created must not wait
// behind the creates of the pods after it.
func withUrgency(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

func urgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// inFlightLimiter hands out the slots of the requests in flight, first to
// the urgent requests waiting, then to the others, each in the order they
// came.
type inFlightLimiter struct {
	mu              sync.Mutex
	free            int
	urgent, waiting []chan struct{}
}

// acquire takes a slot, waiting for one for as long as ctx lasts.
func (l *inFlightLimiter) acquire(ctx context.Context) error {
	l.mu.Lock()
	// A slot is free only while no request waits (releaseLocked hands a
	// slot to the first waiting before it frees one).
	if l.free > 0 {
		l.free--
		l.mu.Unlock()
		return nil
	}
	queue := &l.waiting
	if urgent(ctx) {
		queue = &l.urgent
	}
	ready := make(chan struct{})
	*queue = append(*queue, ready)
	l.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		if i := slices.Index(*queue, ready); i >= 0 {
			*queue = slices.Delete(*queue, i, i+1)
			return ctx.Err()
		}
		// Handed a slot as the context ended: give it on.
		l.releaseLocked()
		return ctx.Err()
	}
}

func (l *inFlightLimiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked()
}

func (l *inFlightLimiter) releaseLocked() {
	for _, queue := range []*[]chan struct{}{&l.urgent, &l.waiting} {
		if len(*queue) > 0 {
			close((*queue)[0])
			*queue = (*queue)[1:]
			return
		}
	}
	l.free++
}

// limitedTransport is the transport limitInFlight makes.
type limitedTransport struct {
	rt http.RoundTripper
	l  *inFlightLimiter
}

// RoundTrip sends req once it holds a slot, which it gives back when the
// answer's body is closed, or at once if there is no answer.
func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.l.acquire(req.Context()); err != nil {
		return nil, err
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		t.l.release()
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: t.l.release}
	return resp, nil
}

// releasingBody gives the request's slot back once the body is closed
// (client-go closes every body it reads).
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

// Close closes the body and gives its request's slot back, once.
func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
