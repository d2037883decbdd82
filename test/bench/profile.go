package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// profileDir is where -profile writes kube-apiserver's CPU profiles; empty
// (the default) takes none.
var profileDir string

// profileSlice is how long each of the CPU profiles that make up a
// measurement's profile samples: the API server's profiler takes a fixed
// number of seconds, so a scenario of unknown length is covered by back to
// back slices, merged when it ends. The last slice runs up to this long
// past the goal, into the settle, where the API server is nearly idle.
const profileSlice = 3 * time.Second

// profileCPU starts sampling kube-apiserver's CPU (its
// /debug/pprof/profile, on by default) when -profile is set, and returns
// a function that stops it and returns the merged profile: the whole
// measured window. It returns nil when none was asked for or all failed
// (logged: a missing profile does not fail the benchmark).
func (c *cluster) profileCPU(ctx context.Context) (stop func() []byte) {
	if profileDir == "" {
		return func() []byte { return nil }
	}
	done := make(chan struct{})
	merged := make(chan []byte, 1)
	go func() {
		var slices []*profile.Profile
		for {
			data, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(int(profileSlice/time.Second))).
				Timeout(profileSlice + time.Minute).DoRaw(ctx)
			if err == nil {
				var p *profile.Profile
				if p, err = profile.ParseData(data); err == nil {
					slices = append(slices, p)
				}
			}
			if err != nil {
				logf("kube-apiserver CPU profile: %v", err)
			}
			select {
			case <-done:
				merged <- mergeProfiles(slices)
				return
			default:
			}
		}
	}()
	return func() []byte {
		close(done)
		return <-merged
	}
}

// mergeProfiles merges CPU profiles taken one after the other into one,
// encoded; nil if there are none or they do not merge.
func mergeProfiles(slices []*profile.Profile) []byte {
	if len(slices) == 0 {
		return nil
	}
	p, err := profile.Merge(slices)
	if err != nil {
		logf("merging kube-apiserver CPU profiles: %v", err)
		return nil
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		logf("encoding kube-apiserver CPU profile: %v", err)
		return nil
	}
	return buf.Bytes()
}

// writeProfile writes a measurement's kube-apiserver profile, if it has
// one, as <scenario>--<contender>.pprof in profileDir.
func (b *bench) writeProfile(scenario, contender string, m *measurement) {
	if profileDir == "" || len(m.apiProfile) == 0 {
		return
	}
	clean := strings.NewReplacer(" ", "", "→", "to", "(", "", ")", "", "%", "", "/", "-", "=", "")
	name := filepath.Join(profileDir, clean.Replace(scenario)+"--"+clean.Replace(contender)+".pprof")
	if err := os.MkdirAll(profileDir, 0o755); err != nil {
		logf("writing the profile: %v", err)
		return
	}
	if err := os.WriteFile(name, m.apiProfile, 0o644); err != nil {
		logf("writing the profile: %v", err)
		return
	}
	logf("%s, %s: kube-apiserver CPU profile in %s", scenario, contender, name)
}
