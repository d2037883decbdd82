package testenv

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServeEndpoints stands in for the EndpointSlice controller, which envtest
// does not run, for a Service selecting every pod of namespace ns: until
// the test ends, it keeps one EndpointSlice listing the pods that are
// Ready and not terminating as ready, each by its UID, as that controller
// does within milliseconds of a pod's change. With it, the operator drains
// a Ready pod before it stops it, as it does where a Service selects the
// pods; without it, no slice lists a pod and nothing is drained.
func ServeEndpoints(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := t.Context()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-served", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if err := c.Create(ctx, slice); err != nil {
		t.Fatalf("creating the EndpointSlice: %v", err)
	}
	sync := func() {
		list := &corev1.PodList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return
		}
		var endpoints []discoveryv1.Endpoint
		for i := range list.Items {
			p := &list.Items[i]
			if p.DeletionTimestamp != nil || !PodReady(p) {
				continue
			}
			endpoints = append(endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.0.0.%d", len(endpoints)+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID},
			})
		}
		slices.SortFunc(endpoints, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.TargetRef.Name, b.TargetRef.Name) })
		if slices.EqualFunc(endpoints, slice.Endpoints, func(a, b discoveryv1.Endpoint) bool { return a.TargetRef.UID == b.TargetRef.UID }) {
			return
		}
		slice.Endpoints = endpoints
		if err := c.Update(ctx, slice); err != nil {
			_ = c.Get(ctx, client.ObjectKeyFromObject(slice), slice)
		}
	}
	sync()
	go func() {
		for ctx.Err() == nil {
			sync()
			time.Sleep(50 * time.Millisecond)
		}
	}()
}
