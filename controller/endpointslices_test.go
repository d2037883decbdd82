package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podset-dev/podset-operator/internal/podset"
)

// TestEndpointsTrackPodsAcrossSlices: a pod leaves the endpoints when the
// last slice that listed it as ready drops it, and comes back when one
// lists it again; a slice that is deleted drops its pods.
func TestEndpointsTrackPodsAcrossSlices(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	a, b := podRef{uid: "a", name: "web-0"}, podRef{uid: "b", name: "web-1"}
	http := types.NamespacedName{Namespace: "ns", Name: "http-x"}
	grpc := types.NamespacedName{Namespace: "ns", Name: "grpc-y"}
	e := newEndpoints()
	uids := []types.UID{"a", "b", "c"}

	if got := e.set(http, []podRef{a, b}, t0); !cmp.Equal(got, []podRef{a, b}, cmp.AllowUnexported(podRef{})) {
		t.Errorf("first slice: changed %v; want a and b", got)
	}
	if got := e.set(grpc, []podRef{a}, t0); len(got) != 0 {
		t.Errorf("a second slice listing a: changed %v; want nothing", got)
	}
	if got := e.set(http, []podRef{b}, t0.Add(time.Second)); len(got) != 0 {
		t.Errorf("http drops a, still in grpc: changed %v; want nothing", got)
	}
	want := podset.Endpoints{"a": {Listed: true}, "b": {Listed: true}}
	if diff := cmp.Diff(want, e.state(uids)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if got := e.set(grpc, nil, t0.Add(2*time.Second)); !cmp.Equal(got, []podRef{a}, cmp.AllowUnexported(podRef{})) {
		t.Errorf("grpc deleted: changed %v; want a", got)
	}
	want = podset.Endpoints{"a": {Left: t0.Add(2 * time.Second)}, "b": {Listed: true}}
	if diff := cmp.Diff(want, e.state(uids)); diff != "" {
		t.Errorf("state after a left (-want +got):\n%s", diff)
	}
	if got := e.set(http, []podRef{a, b}, t0.Add(3*time.Second)); !cmp.Equal(got, []podRef{a}, cmp.AllowUnexported(podRef{})) {
		t.Errorf("a back: changed %v; want a", got)
	}
	if diff := cmp.Diff(podset.Endpoints{"a": {Listed: true}, "b": {Listed: true}}, e.state(uids)); diff != "" {
		t.Errorf("state after a came back (-want +got):\n%s", diff)
	}
	// What a pod left is forgotten after endpointsMemory.
	e.set(http, []podRef{b}, t0.Add(4*time.Second))
	e.set(grpc, nil, t0.Add(4*time.Second+endpointsMemory+time.Second))
	if diff := cmp.Diff(podset.Endpoints{"b": {Listed: true}}, e.state(uids)); diff != "" {
		t.Errorf("state after endpointsMemory (-want +got):\n%s", diff)
	}
}
