package testenv

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestParseRequests(t *testing.T) {
	metrics := []byte(`# HELP apiserver_request_total Counter of apiserver requests.
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 0.5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 10
`)
	r, err := ParseRequests(metrics)
	if err != nil {
		t.Fatal(err)
	}
	writes := func(k RequestKey) bool { return IsWrite(k.Verb) }
	if got := r.Count(writes); got != 17 {
		t.Errorf("writes = %d, want 17 (10 POSTs, 7 PATCHes; not the LIST, not the seconds)", got)
	}
	if got := r[RequestKey{Verb: "POST", Resource: "pods", Code: "201", Seconds: false}]; got != 10 {
		t.Errorf("pod POSTs = %v, want 10", got)
	}
	if got := r[RequestKey{Verb: "POST", Resource: "pods", Seconds: true}]; got != 0.5 {
		t.Errorf("seconds answering pod POSTs = %v, want 0.5", got)
	}
	before := Requests{{Verb: "PATCH", Resource: "pods", Subresource: "status", Code: "200"}: 4}
	d := r.Sub(before)
	if got := d.Count(func(k RequestKey) bool { return k.Subresource == "status" }); got != 3 {
		t.Errorf("status patches since before = %d, want 1 landed and 2 refused", got)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 10; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Second)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5 * time.Second}, {90, 9 * time.Second}, {99, 10 * time.Second}, {0, time.Second}} {
		if got := Percentile(d, tc.p); got != tc.want {
			t.Errorf("Percentile(1..10 s, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if d[0] != 10*time.Second {
		t.Error("Percentile sorted its argument")
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile of nothing = %v, want 0", got)
	}
}

func TestPodEvents(t *testing.T) {
	var got []string
	before := time.Now()
	handle := PodEvents(func(typ watch.EventType, p *corev1.Pod, at time.Time) {
		if at.Before(before) {
			t.Errorf("%s timed %v, before the event came", p.Name, at)
		}
		got = append(got, string(typ)+" "+p.Name)
	})
	handle(watch.Event{Type: watch.Added, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}})
	handle(watch.Event{Type: watch.Error, Object: &metav1.Status{Message: "too old"}})
	handle(watch.Event{Type: watch.Deleted, Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}})
	if want := []string{"ADDED web-0", "DELETED web-0"}; !slices.Equal(got, want) {
		t.Errorf("pod events %v, want %v: what is not a pod is passed over", got, want)
	}
}
