//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// TestServiceNamePublishesEachPodsHostname runs the operator under its
// shipped RBAC with a PodSet whose spec.serviceName names a headless
// Service: kube-controller-manager's EndpointSlice controller lists each
// pod in the Service's EndpointSlices with its hostname (the pod's own
// name), which is what cluster DNS answers <pod>.<service>.<namespace>.svc
// from (the real node's suite asks a real DNS server). A new serviceName
// recreates the pods, and the new Service's slices list them.
func TestServiceNamePublishesEachPodsHostname(t *testing.T) {
	requireInstalled(t)
	scaleOperatorDeploymentToZero(t)
	startOperator(t)

	ns := newNamespace(t, "podset-dns-", nil)
	for _, svc := range []string{"web-dns", "web-peers"} {
		if err := suite.client.Create(t.Context(), testenv.HeadlessService(ns, svc, "web")); err != nil {
			t.Fatal(err)
		}
	}
	ps := fixture.PodSet(ns, "web").Replicas(3).MaxUnavailable(3).Mutate(func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.ServiceName = "web-dns"
	}).Obj()
	if err := suite.client.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	before := waitForPodSet(t, ps, 3)
	names := podNames(ps.Name, 0, 3)
	waitForHostnames(t, ns, "web-dns", names)

	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	ps.Spec.ServiceName = "web-peers"
	if err := suite.client.Update(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every pod recreated for the new serviceName", func(ctx context.Context) error {
		pods, err := listPods(ctx, ns, client.MatchingLabels{podsetv1alpha1.NameLabel: ps.Name})
		if err != nil {
			return err
		}
		for _, name := range names {
			p, ok := pods[name]
			switch {
			case !ok:
				return fmt.Errorf("%s missing", name)
			case p.UID == before[name] || p.Spec.Subdomain != "web-peers":
				return fmt.Errorf("%s not recreated yet (subdomain %q)", name, p.Spec.Subdomain)
			}
		}
		return nil
	})
	waitForPodSet(t, ps, 3)
	waitForHostnames(t, ns, "web-peers", names)
}

// waitForHostnames waits until the EndpointSlices of Service svc list
// exactly the pods names, each ready, with its IP and its own name as
// hostname.
func waitForHostnames(t *testing.T, ns, svc string, names []string) {
	t.Helper()
	var seen map[string]string
	eventually(t, fmt.Sprintf("the EndpointSlices of %s list %v by hostname", svc, names), func(ctx context.Context) error {
		list := &discoveryv1.EndpointSliceList{}
		if err := suite.client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
			return err
		}
		seen = map[string]string{}
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef == nil || !ptr.Deref(ep.Conditions.Ready, false) || len(ep.Addresses) == 0 {
					continue
				}
				if got := ptr.Deref(ep.Hostname, ""); got != ep.TargetRef.Name {
					return fmt.Errorf("pod %s is listed with hostname %q", ep.TargetRef.Name, got)
				}
				seen[ep.TargetRef.Name] = ep.Addresses[0]
			}
		}
		if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, names) {
			return fmt.Errorf("ready endpoints %v, want %v", got, names)
		}
		return nil
	})
	t.Logf("EndpointSlices of %s: hostname -> address %v", svc, seen)
}
