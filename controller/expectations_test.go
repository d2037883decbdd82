package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time                  { return c.t }
func (c *fakeClock) Since(t time.Time) time.Duration { return c.t.Sub(t) }
func (c *fakeClock) advance(d time.Duration)         { c.t = c.t.Add(d) }

// newTestMemory is an empty memory on a fake clock.
func newTestMemory() (*memory, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	return newMemory(clock), clock
}

var webKey = types.NamespacedName{Namespace: "default", Name: "web"}

// cachedPod is a live pod as the cache shows it.
func cachedPod(name string, uid types.UID) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: webKey.Namespace, UID: uid}}
}

func TestExpectationsDelete(t *testing.T) {
	cases := map[string]struct {
		cache        []corev1.Pod
		wantInFlight bool
	}{
		"the cache still shows the pod, live": {
			cache:        []corev1.Pod{cachedPod("web-0", "doomed")},
			wantInFlight: true,
		},
		"the pod is gone": {
			cache: []corev1.Pod{cachedPod("web-1", "other")},
		},
		"the cache is empty": {},
		"the pod is terminating": {
			cache: []corev1.Pod{terminating(cachedPod("web-0", "doomed"))},
		},
		"the pod was replaced by another UID": {
			cache: []corev1.Pod{cachedPod("web-0", "replacement")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, _ := newTestMemory()
			e.expectDeleted(webKey, "web-0", "doomed")
			inFlight := e.inFlight(webKey, tc.cache)
			if got := inFlight("web-0"); got != tc.wantInFlight {
				t.Errorf("inFlight(web-0) = %v, want %v", got, tc.wantInFlight)
			}
			if inFlight("web-1") {
				t.Error("inFlight(web-1) = true for a name with no expectation")
			}
			// Once satisfied, the old pod reappearing (a cache that went
			// back in time) does not bring the expectation back; a pending
			// one stays.
			if got := e.inFlight(webKey, []corev1.Pod{cachedPod("web-0", "doomed")})("web-0"); got != tc.wantInFlight {
				t.Errorf("inFlight(web-0) on the next pass = %v, want %v", got, tc.wantInFlight)
			}
		})
	}
}

func TestExpectationsExpire(t *testing.T) {
	e, clock := newTestMemory()
	e.expectDeleted(webKey, "web-0", "never-gone-0")
	e.expectDeleted(webKey, "web-1", "never-gone-1")
	clock.advance(expectationTTL / 2)
	e.expectDeleted(webKey, "web-2", "never-gone-2")
	// The cache never shows the deletions.
	cache := []corev1.Pod{cachedPod("web-0", "never-gone-0"), cachedPod("web-1", "never-gone-1"), cachedPod("web-2", "never-gone-2")}

	clock.advance(expectationTTL / 2)
	inFlight := e.inFlight(webKey, cache)
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		if !inFlight(name) {
			t.Errorf("after exactly expectationTTL: inFlight(%s) = false, want true", name)
		}
	}

	clock.advance(time.Nanosecond)
	inFlight = e.inFlight(webKey, cache)
	for name, want := range map[string]bool{"web-0": false, "web-1": false, "web-2": true} {
		if got := inFlight(name); got != want {
			t.Errorf("after expectationTTL: inFlight(%s) = %v, want %v", name, got, want)
		}
	}

	clock.advance(expectationTTL)
	if e.inFlight(webKey, cache)("web-2") {
		t.Error("inFlight(web-2) = true after its own expectationTTL, want false")
	}
	if w := e.records[webKey].writes; len(w) != 0 {
		t.Errorf("writes in flight = %v after every expectation expired, want none", w)
	}
}

func TestExpectationsAreKeptPerPodSet(t *testing.T) {
	e, _ := newTestMemory()
	other := types.NamespacedName{Namespace: "other", Name: "web"}
	e.expectDeleted(webKey, "web-0", "a")
	e.expectDeleted(other, "web-0", "b")

	// The other PodSet's pod going satisfies its own expectation only.
	if e.inFlight(other, nil)("web-0") {
		t.Error("observe(other) without its pod: inFlight(web-0) = true, want false")
	}
	if !e.inFlight(webKey, []corev1.Pod{cachedPod("web-0", "a")})("web-0") {
		t.Error("observe(web) with its pod still live: inFlight(web-0) = false, want true")
	}
}

func TestExpectationsForget(t *testing.T) {
	e, _ := newTestMemory()
	other := types.NamespacedName{Namespace: webKey.Namespace, Name: "api"}
	e.expectDeleted(webKey, "web-0", "a")
	e.expectDeleted(webKey, "web-1", "b")
	e.expectDeleted(other, "api-0", "c")

	e.forget(webKey)

	inFlight := e.inFlight(webKey, []corev1.Pod{cachedPod("web-0", "a"), cachedPod("web-1", "b")})
	if inFlight("web-0") || inFlight("web-1") {
		t.Error("a forgotten PodSet still has deletions in flight")
	}
	if !e.inFlight(other, []corev1.Pod{cachedPod("api-0", "c")})("api-0") {
		t.Error("forget(web) dropped the expectations of another PodSet")
	}
}

// TestExpectationsLatestWins checks that a second deletion of a name (the
// replacement pod, deleted in turn) replaces the expectation of the first.
func TestExpectationsLatestWins(t *testing.T) {
	e, _ := newTestMemory()
	e.expectDeleted(webKey, "web-0", "first")
	e.expectDeleted(webKey, "web-0", "second")
	if !e.inFlight(webKey, []corev1.Pod{cachedPod("web-0", "second")})("web-0") {
		t.Error("inFlight(web-0) = false while the second pod is still live, want true")
	}
	if e.inFlight(webKey, nil)("web-0") {
		t.Error("inFlight(web-0) = true once the second pod is gone, want false")
	}
}

func TestExpectationsCreate(t *testing.T) {
	cases := map[string]struct {
		cache        []corev1.Pod
		wantInFlight bool
	}{
		"the cache is empty":                 {wantInFlight: true},
		"the cache shows other pods":         {cache: []corev1.Pod{cachedPod("web-1", "other")}, wantInFlight: true},
		"the cache shows the new pod":        {cache: []corev1.Pod{cachedPod("web-0", "new")}},
		"the cache shows another UID":        {cache: []corev1.Pod{cachedPod("web-0", "someone-elses")}},
		"the new pod is terminating already": {cache: []corev1.Pod{terminating(cachedPod("web-0", "new"))}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, _ := newTestMemory()
			e.expectCreated(webKey, "web-0", "new")
			if got := e.inFlight(webKey, tc.cache)("web-0"); got != tc.wantInFlight {
				t.Errorf("inFlight(web-0) = %v, want %v", got, tc.wantInFlight)
			}
			// Once seen, the pod leaving the cache (deleted, or its label
			// removed) does not bring the expectation back.
			if got := e.inFlight(webKey, nil)("web-0"); got != tc.wantInFlight {
				t.Errorf("inFlight(web-0) on the next pass, cache empty = %v, want %v", got, tc.wantInFlight)
			}
		})
	}
}

// TestExpectationsCreateRecheck checks that a creation the cache never
// shows (its label was removed at once) is waited for createTTL at most,
// and that the PodSet is told when to look again.
func TestExpectationsCreateRecheck(t *testing.T) {
	e, clock := newTestMemory()
	if got := e.recheck(webKey); got != 0 {
		t.Errorf("recheck() with nothing pending = %v, want 0", got)
	}
	e.expectDeleted(webKey, "web-5", "doomed")
	if got := e.recheck(webKey); got != 0 {
		t.Errorf("recheck() with only a deletion pending = %v, want 0 (its pod's event wakes the PodSet)", got)
	}
	e.expectCreated(webKey, "web-0", "a")
	clock.advance(createTTL / 2)
	e.expectCreated(webKey, "web-1", "b")
	if got, want := e.recheck(webKey), createTTL/2+time.Millisecond; got != want {
		t.Errorf("recheck() = %v, want %v (when web-0's wait is over)", got, want)
	}
	clock.advance(createTTL / 2)
	if inFlight := e.inFlight(webKey, nil); !inFlight("web-0") || !inFlight("web-1") {
		t.Error("after exactly createTTL: a creation is no longer in flight, want both")
	}
	clock.advance(time.Nanosecond)
	inFlight := e.inFlight(webKey, nil)
	if inFlight("web-0") || !inFlight("web-1") {
		t.Errorf("after createTTL: inFlight(web-0) = %v, inFlight(web-1) = %v; want false, true", inFlight("web-0"), inFlight("web-1"))
	}
	clock.advance(createTTL)
	if e.inFlight(webKey, []corev1.Pod{cachedPod("web-5", "doomed")})("web-1") {
		t.Error("inFlight(web-1) = true after its own createTTL, want false")
	}
	if got := e.recheck(webKey); got != 0 {
		t.Errorf("recheck() once every creation expired = %v, want 0", got)
	}
}

// terminating is a pod with a deletion timestamp.
func terminating(pod corev1.Pod) corev1.Pod {
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	return pod
}

// TestExpectationsGateOpening checks what a pass that starts while a new
// pod's gate is opening in the background (openGate) makes of the pod: in
// flight until the apply is through and the cache shows it, or, if the
// apply failed, once the cache shows the pod, so that the pass opens the
// gate; and that a late answer never brings back what a pass dropped.
func TestExpectationsGateOpening(t *testing.T) {
	atVersion := func(pod corev1.Pod, rv string) corev1.Pod { pod.ResourceVersion = rv; return pod }
	created := atVersion(cachedPod("web-0", "new"), "10")
	gated := atVersion(cachedPod("web-0", "new"), "12")

	t.Run("opened", func(t *testing.T) {
		e, _ := newTestMemory()
		e.expectCreated(webKey, "web-0", "new")
		e.expectGateOpening(webKey, "web-0", "new")
		if !e.inFlight(webKey, []corev1.Pod{created})("web-0") {
			t.Error("the cache shows the new pod while its gate opens: not in flight, want in flight (a pass would open the gate again)")
		}
		if got := e.recheck(webKey); got == 0 || got > createTTL+time.Millisecond {
			t.Errorf("recheck() = %v while the gate opens, want within createTTL", got)
		}
		e.gateOpened(webKey, "web-0", "new", "12")
		if !e.inFlight(webKey, []corev1.Pod{created})("web-0") {
			t.Error("gate opened at 12, cache at 10: not in flight, want in flight")
		}
		if e.inFlight(webKey, []corev1.Pod{gated})("web-0") {
			t.Error("gate opened at 12, cache at 12: in flight, want not")
		}
	})
	t.Run("not opened", func(t *testing.T) {
		e, _ := newTestMemory()
		e.expectGateOpening(webKey, "web-0", "new")
		e.gateNotOpened(webKey, "web-0", "new")
		if !e.inFlight(webKey, nil)("web-0") {
			t.Error("the cache does not show the pod yet: not in flight, want in flight")
		}
		if e.inFlight(webKey, []corev1.Pod{created})("web-0") {
			t.Error("the gate did not open and the cache shows the pod: in flight, want not (the pass opens the gate)")
		}
	})
	t.Run("expired", func(t *testing.T) {
		e, clock := newTestMemory()
		e.expectGateOpening(webKey, "web-0", "new")
		clock.advance(createTTL + time.Nanosecond)
		if e.inFlight(webKey, []corev1.Pod{created})("web-0") {
			t.Error("a gate opening for longer than createTTL: in flight, want not")
		}
		e.gateOpened(webKey, "web-0", "new", "12")
		if e.inFlight(webKey, []corev1.Pod{created})("web-0") {
			t.Error("a late answer brought back a dropped expectation")
		}
	})
	t.Run("another pod since", func(t *testing.T) {
		e, _ := newTestMemory()
		e.expectGateOpening(webKey, "web-0", "new")
		e.expectDeleted(webKey, "web-0", "new")
		e.gateNotOpened(webKey, "web-0", "new")
		if !e.inFlight(webKey, []corev1.Pod{created})("web-0") {
			t.Error("the late answer replaced the deletion expected since")
		}
	})
	t.Run("PodSet forgotten", func(t *testing.T) {
		e, _ := newTestMemory()
		e.expectGateOpening(webKey, "web-0", "new")
		e.forget(webKey)
		e.gateOpened(webKey, "web-0", "new", "12")
		if _, ok := e.records[webKey]; ok {
			t.Error("a late answer made a record for a forgotten PodSet")
		}
	})
}
