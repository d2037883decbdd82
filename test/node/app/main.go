// Command app is the workload that node tests run in PodSet pods. It
// reports the version it was built as, so a test can tell which revision
// a pod runs, and it fails readiness as soon as it is asked to stop.
//
// Build a version with -ldflags "-X main.version=v1"; add -X main.crash=1
// for a version that exits 1 at start, so its pods crash-loop. With
// -check FILE it only checks a configuration file and exits, as an init
// container would. GET /lookup?host=NAME answers the addresses the pod's
// own resolver finds for NAME, so a test sees a pod resolve a peer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// version is what GET / answers; set by the linker.
var version = "dev"

// crash, when set non-empty by the linker, makes the program exit 1 at start.
var crash = ""

func main() {
	if crash != "" {
		fmt.Fprintf(os.Stderr, "app %s: built to crash, exiting\n", version)
		os.Exit(1)
	}
	listen := flag.String("listen", ":8080", "address to serve HTTP on")
	shutdownTimeout := flag.Duration("shutdown-timeout", 10*time.Second, "how long in-flight requests may take after SIGTERM")
	check := flag.String("check", "", "check that this configuration file is readable and not empty, and exit (an init container's job)")
	flag.Parse()

	if *check != "" {
		b, err := os.ReadFile(*check)
		if err == nil && len(b) == 0 {
			err = errors.New("empty")
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "app %s: configuration %s: %v\n", version, *check, err)
			os.Exit(1)
		}
		return
	}

	if err := serve(*listen, *shutdownTimeout); err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

// serve answers requests until SIGTERM or SIGINT, then drains them.
func serve(listen string, shutdownTimeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	var stopping atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, version) // a client gone is not the server's error
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if stopping.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprint(w, "ok")
	})
	// GET /lookup?host=NAME answers the addresses the pod's resolver
	// (its resolv.conf: the cluster's DNS, its search path) finds for
	// NAME, one line: how a test sees a pod resolve a peer by name.
	mux.HandleFunc("GET /lookup", func(w http.ResponseWriter, r *http.Request) {
		addrs, err := net.DefaultResolver.LookupHost(r.Context(), r.URL.Query().Get("host"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, strings.Join(addrs, " "))
	})
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}

	stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// Stopping was asked for, so running out of time to drain is not a
	// failure of the app: exit 0 either way.
	return nil
}
