package controller

import (
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// MaxRequestsInFlight bounds the operator's requests to the API server
// that are in flight at once, watches aside.
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
// Lease and its events their streams on the one connection.
const MaxRequestsInFlight = 90

// limitRequestsInFlight returns a copy of cfg whose transport holds at most
// n requests in flight, watches aside: a request beyond them waits for one
// to end (its body closed) or for its context to end.
func limitRequestsInFlight(cfg *rest.Config, n int) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	slots := make(chan struct{}, n)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &inFlightLimiter{rt: rt, slots: slots}
	})
	return cfg
}

// inFlightLimiter is the transport limitRequestsInFlight adds.
type inFlightLimiter struct {
	rt    http.RoundTripper
	slots chan struct{}
}

func (l *inFlightLimiter) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return l.rt.RoundTrip(req)
	}
	select {
	case l.slots <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	resp, err := l.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		<-l.slots
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() { <-l.slots }}
	return resp, nil
}

// isWatch says whether req is a watch, which holds its stream for as long
// as it lasts and is not counted.
func isWatch(req *http.Request) bool {
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return false
}

// releasingBody gives the request's slot back once the body is closed
// (client-go closes every body it reads).
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
