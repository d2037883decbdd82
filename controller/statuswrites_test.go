package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

func TestStatusWritesWait(t *testing.T) {
	other := types.NamespacedName{Namespace: webKey.Namespace, Name: "api"}
	w, clock := newTestMemory()
	t0 := clock.Now()
	at := func(d time.Duration) *memory { clock.t = t0.Add(d); return w }
	if got := at(0).statusWait(webKey); got != StatusInterval {
		t.Errorf("wait() on first sight = %v, want %v", got, StatusInterval)
	}
	if got := at(StatusInterval).statusWait(webKey); got != 0 {
		t.Errorf("wait() one interval after first sight = %v, want 0", got)
	}
	at(0).wroteStatus(webKey, "7", podsetv1alpha1.PodSetStatus{})
	for _, tc := range []struct {
		after time.Duration
		want  time.Duration
	}{
		{0, StatusInterval},
		{StatusInterval / 4, StatusInterval * 3 / 4},
		{StatusInterval, 0},
		{time.Hour, 0},
	} {
		if got := at(tc.after).statusWait(webKey); got != tc.want {
			t.Errorf("wait() %v after a write = %v, want %v", tc.after, got, tc.want)
		}
	}
	if got := at(time.Hour).statusWait(other); got != StatusInterval {
		t.Errorf("wait() of another PodSet on first sight = %v, want %v", got, StatusInterval)
	}
	w.forget(webKey)
	if got := at(time.Hour).statusWait(webKey); got != StatusInterval {
		t.Errorf("wait() after forget = %v, want %v (first sight again)", got, StatusInterval)
	}
}

func TestStatusWritesShownUntilTheCacheCatchesUp(t *testing.T) {
	status := func(replicas int32) podsetv1alpha1.PodSetStatus {
		return podsetv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: replicas}
	}
	cached := func(rv string, replicas int32) *podsetv1alpha1.PodSet {
		return &podsetv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}, Status: status(replicas)}
	}
	w, _ := newTestMemory()
	if got := w.shownStatus(webKey, cached("10", 3)); got.Replicas != 3 {
		t.Errorf("shown() before any write = %d replicas, want the cache's 3", got.Replicas)
	}
	// The operator writes 2 replicas; the answer says resourceVersion 12.
	w.wroteStatus(webKey, "12", status(2))
	for _, tc := range []struct {
		rv       string
		replicas int32
		want     int32
	}{
		{"10", 3, 2}, // the cache is behind the write: what was written
		{"11", 3, 2}, // still behind
		{"12", 2, 2}, // caught up
		{"13", 5, 5}, // someone wrote after the operator: the cache
		{"11", 3, 3}, // once caught up, the write is forgotten
	} {
		if got := w.shownStatus(webKey, cached(tc.rv, tc.replicas)); got.Replicas != tc.want {
			t.Errorf("shown() with the cache at resourceVersion %s = %d replicas, want %d", tc.rv, got.Replicas, tc.want)
		}
	}
	w.wroteStatus(webKey, "not-a-number", status(2))
	if got := w.shownStatus(webKey, cached("10", 3)); got.Replicas != 3 {
		t.Errorf("shown() with versions that do not compare = %d replicas, want the cache's 3", got.Replicas)
	}
}
