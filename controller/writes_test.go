package controller

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// TestSlowStartBatches checks that slowStart sends batches of 1, 2, 4, ...
// one after the other: every call of a batch starts (the workers allow it),
// and nothing of the next batch starts before the batch has returned. Calls
// block until the test releases them.
func TestSlowStartBatches(t *testing.T) {
	cases := map[string]struct {
		n           int
		wantBatches []int
	}{
		"10 calls": {n: 10, wantBatches: []int{1, 2, 4, 3}},
		"16 calls": {n: 16, wantBatches: []int{1, 2, 4, 8, 1}},
		"1 call":   {n: 1, wantBatches: []int{1}},
		"no calls": {n: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var (
				mu      sync.Mutex
				started []int
				release = make(chan struct{})
			)
			done := make(chan error, 1)
			go func() {
				done <- slowStart(tc.n, 100, func(i int) error {
					mu.Lock()
					started = append(started, i)
					mu.Unlock()
					<-release
					return nil
				})
			}()
			startedCount := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(started)
			}
			total := 0
			for b, size := range tc.wantBatches {
				total += size
				waitFor(t, fmt.Sprintf("the %d calls of batch %d to start", size, b), func() bool { return startedCount() >= total })
				// Give a call that starts too early the time to show.
				time.Sleep(10 * time.Millisecond)
				if got := startedCount(); got != total {
					t.Fatalf("during batch %d: %d calls started, want %d", b, got, total)
				}
				for range size {
					release <- struct{}{}
				}
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("slowStart() error = %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("slowStart() did not return")
			}
			seen := map[int]bool{}
			for _, i := range started {
				if seen[i] || i < 0 || i >= tc.n {
					t.Errorf("slowStart() called fn(%d) twice or out of range", i)
				}
				seen[i] = true
			}
			if len(seen) != tc.n {
				t.Errorf("slowStart() called fn for %d indexes, want %d", len(seen), tc.n)
			}
		})
	}
}

// TestSlowStartBatchBoundaries checks, with fewer workers than the larger
// batches, that batches never overlap: fn(i) starts only once every call
// of the batches before i's has returned, and at most workers run at once.
func TestSlowStartBatchBoundaries(t *testing.T) {
	const n, workers = 20, 3
	var (
		mu           sync.Mutex
		returned     int
		active, peak int
		// seenReturned[i] is how many calls had returned when fn(i) started.
		seenReturned = map[int]int{}
	)
	err := slowStart(n, workers, func(i int) error {
		mu.Lock()
		seenReturned[i] = returned
		active++
		peak = max(peak, active)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		returned++
		active--
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("slowStart() error = %v", err)
	}
	// Batches: [0] [1 2] [3..6] [7..14] [15..19].
	batchStart := func(i int) int {
		start, size := 0, 1
		for i >= start+size {
			start, size = start+size, size*2
		}
		return start
	}
	for i := range n {
		if got, want := seenReturned[i], batchStart(i); got < want {
			t.Errorf("fn(%d) started after %d calls returned, want at least %d (every call of the earlier batches)", i, got, want)
		}
	}
	if peak > workers {
		t.Errorf("slowStart() ran %d calls at once, want at most %d", peak, workers)
	}
}

func TestSlowStartStopsAfterTheFirstFailingBatch(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]struct {
		n         int
		fail      map[int]bool
		wantCalls int
		wantErrs  int
	}{
		"the first call fails: one call":               {n: 100, fail: map[int]bool{0: true}, wantCalls: 1, wantErrs: 1},
		"a call of the second batch fails: 3 calls":    {n: 100, fail: map[int]bool{2: true}, wantCalls: 3, wantErrs: 1},
		"a call of the third batch fails: 7 calls":     {n: 100, fail: map[int]bool{3: true}, wantCalls: 7, wantErrs: 1},
		"two calls of the fourth batch fail: 15 calls": {n: 100, fail: map[int]bool{8: true, 14: true}, wantCalls: 15, wantErrs: 2},
		"the last call fails: every call":              {n: 10, fail: map[int]bool{9: true}, wantCalls: 10, wantErrs: 1},
		"no failure: every call":                       {n: 100, wantCalls: 100},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int64
			err := slowStart(tc.n, 4, func(i int) error {
				calls.Add(1)
				if tc.fail[i] {
					return fmt.Errorf("call %d: %w", i, errBoom)
				}
				return nil
			})
			if got := int(calls.Load()); got != tc.wantCalls {
				t.Errorf("slowStart() made %d calls, want %d", got, tc.wantCalls)
			}
			if (err != nil) != (tc.wantErrs > 0) || (err != nil && !errors.Is(err, errBoom)) {
				t.Fatalf("slowStart() error = %v, want %d errors wrapping %v", err, tc.wantErrs, errBoom)
			}
			if err != nil {
				if got := len(err.(interface{ Unwrap() []error }).Unwrap()); got != tc.wantErrs {
					t.Errorf("slowStart() joined %d errors, want %d: %v", got, tc.wantErrs, err)
				}
			}
		})
	}
}

func TestParallelBoundsConcurrency(t *testing.T) {
	cases := map[string]struct {
		n, workers, wantMax int
	}{
		"4 workers":               {n: 50, workers: 4, wantMax: 4},
		"1 worker":                {n: 10, workers: 1, wantMax: 1},
		"0 workers means 1":       {n: 10, workers: 0, wantMax: 1},
		"more workers than calls": {n: 3, workers: 10, wantMax: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var active, peak atomic.Int64
			calls := make([]atomic.Int64, tc.n)
			err := parallel(tc.n, tc.workers, func(i int) error {
				defer active.Add(-1)
				raise(&peak, active.Add(1))
				calls[i].Add(1)
				// The first calls wait until the bound is reached, so that
				// a bound that is never reached is seen too.
				if i < tc.wantMax {
					pollUntil(func() bool { return peak.Load() >= int64(tc.wantMax) }, 5*time.Second)
				}
				time.Sleep(200 * time.Microsecond)
				return nil
			})
			if err != nil {
				t.Fatalf("parallel() error = %v", err)
			}
			if got := int(peak.Load()); got != tc.wantMax {
				t.Errorf("parallel() ran %d calls at once, want %d", got, tc.wantMax)
			}
			for i := range calls {
				if got := calls[i].Load(); got != 1 {
					t.Errorf("parallel() called fn(%d) %d times, want once", i, got)
				}
			}
		})
	}
}

// raise sets peak to n if n is higher.
func raise(peak *atomic.Int64, n int64) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// pollUntil polls cond until it holds or timeout has passed.
func pollUntil(cond func() bool, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
}

func TestParallelJoinsErrors(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	var calls atomic.Int64
	err := parallel(10, 3, func(i int) error {
		calls.Add(1)
		switch i {
		case 2:
			return errA
		case 7:
			return errB
		}
		return nil
	})
	if calls.Load() != 10 {
		t.Errorf("parallel() made %d calls, want 10: an error must not stop the others", calls.Load())
	}
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Errorf("parallel() error = %v, want both %v and %v", err, errA, errB)
	}
	if err := parallel(5, 2, func(int) error { return nil }); err != nil {
		t.Errorf("parallel() with no failure: error = %v, want nil", err)
	}
	if err := parallel(0, 2, func(int) error { t.Error("fn called for n = 0"); return nil }); err != nil {
		t.Errorf("parallel(0) error = %v, want nil", err)
	}
}

// waitFor polls cond until it holds, or fails the test after 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestEventNote(t *testing.T) {
	long := strings.Repeat("é", 600) // 1200 bytes
	cases := map[string]struct {
		message string
		want    string
	}{
		"short: whole":                  {message: "pods web-0: Unschedulable", want: "pods web-0: Unschedulable"},
		"exactly the limit: whole":      {message: strings.Repeat("a", maxEventNote), want: strings.Repeat("a", maxEventNote)},
		"long: cut on a rune, ellipsis": {message: long, want: strings.Repeat("é", 510) + "…"},
		"a percent sign is no verb":     {message: "100% unavailable", want: "100% unavailable"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := eventNote(tc.message)
			if got != tc.want || len(got) > maxEventNote || !utf8.ValidString(got) {
				t.Errorf("eventNote() = %q (%d bytes), want %q", got, len(got), tc.want)
			}
		})
	}
}
