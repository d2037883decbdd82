package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profileSlice is how long each of the CPU profiles that cover a
// measurement samples: the API server's profiler takes a fixed number of
// seconds, so a scenario of unknown length is covered by back to back
// slices, which go tool pprof merges when given them all. The last slice
// runs up to this long past the goal, into the settle, where the API
// server is nearly idle.
const profileSlice = 3 * time.Second

// profileCPU starts sampling kube-apiserver's CPU (its
// /debug/pprof/profile, on by default) when -profile is set, and returns
// a function that stops it and returns the slices taken: together, the
// whole measured window. Failures are logged: a missing profile does not
// fail the benchmark.
func (c *cluster) profileCPU(ctx context.Context, profileDir string) (stop func() [][]byte) {
	if profileDir == "" {
		return func() [][]byte { return nil }
	}
	done := make(chan struct{})
	taken := make(chan [][]byte, 1)
	go func() {
		var slices [][]byte
		defer func() { taken <- slices }()
		for {
			data, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(int(profileSlice/time.Second))).
				Timeout(profileSlice + time.Minute).DoRaw(ctx)
			if err == nil {
				slices = append(slices, data)
			} else {
				// An API server that fails at once is not asked again
				// at once.
				logf("kube-apiserver CPU profile: %v", err)
				select {
				case <-done:
					return
				case <-time.After(profileSlice):
				}
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	return func() [][]byte {
		close(done)
		return <-taken
	}
}

// writeProfile writes a measurement's kube-apiserver profile, if it has
// one, as the numbered slices 01.pprof, 02.pprof, ... in the folder
// <scenario>--<contender> of profileDir: `go tool pprof
// bin/controlplane/.../kube-apiserver DIR/*.pprof` reads them as one.
func (b *bench) writeProfile(scenario, contender string, m *measurement) {
	if b.profileDir == "" || len(m.apiProfile) == 0 {
		return
	}
	clean := strings.NewReplacer(" ", "", "->", "to", "→", "to", "(", "", ")", "", "%", "", "/", "-", "=", "")
	dir := filepath.Join(b.profileDir, clean.Replace(scenario)+"--"+clean.Replace(contender))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("writing the profile: %v", err)
		return
	}
	for i, data := range m.apiProfile {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d.pprof", i+1)), data, 0o644); err != nil {
			logf("writing the profile: %v", err)
			return
		}
	}
	logf("%s, %s: kube-apiserver CPU profile in %s (%d slices of %s)", scenario, contender, dir, len(m.apiProfile), profileSlice)
}
