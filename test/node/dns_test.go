//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// clusterDNS asks the cluster's DNS, CoreDNS built from its Go module
// (hack/coredns) that hack/node.sh runs on 127.0.0.1:53 and node 1's
// bridge address when COREDNS is set, and nothing else.
var clusterDNS = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "udp", "127.0.0.1:53")
}}

// needDNS skips the test, loudly, when the node runs no cluster DNS.
func needDNS(t *testing.T) {
	t.Helper()
	if os.Getenv("COREDNS") == "" {
		t.Skip("SKIPPED: no cluster DNS; run the suite with make test-node, which builds CoreDNS (COREDNS)")
	}
}

// podFQDN is the DNS name of a pod of a headless Service.
func podFQDN(pod, service, ns string) string {
	return pod + "." + service + "." + ns + ".svc.cluster.local."
}

// waitDNS waits until the cluster's DNS answers each pod of the PodSet's
// name under service with that pod's IP, and only with it.
func waitDNS(t *testing.T, ps *podsetv1alpha1.PodSet, service string, want map[string]identity) {
	t.Helper()
	eventually(t, fmt.Sprintf("DNS answers every pod's name under %s with its IP", service), func(ctx context.Context) error {
		for name, id := range want {
			got, err := clusterDNS.LookupHost(ctx, podFQDN(name, service, ps.Namespace))
			if err != nil {
				return err
			}
			if !slices.Equal(got, []string{id.ip}) {
				return fmt.Errorf("%s answers %v, want %s", podFQDN(name, service, ps.Namespace), got, id.ip)
			}
		}
		return nil
	})
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Logf("DNS: %s -> %s", podFQDN(name, service, ps.Namespace), want[name].ip)
	}
}

// waitNoName waits until the cluster's DNS says a name does not exist.
func waitNoName(t *testing.T, name string) {
	t.Helper()
	eventually(t, name+" does not resolve", func(ctx context.Context) error {
		got, err := clusterDNS.LookupHost(ctx, name)
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil
		}
		return fmt.Errorf("answers %v (%v)", got, err)
	})
}

// waitPeerLookup waits until the test app in pod from, through its own
// resolver (the cluster DNS and the search path the kubelet gave it),
// resolves the short name peer to want.
func waitPeerLookup(t *testing.T, ps *podsetv1alpha1.PodSet, from, peer, want string) {
	t.Helper()
	ip := pods(t, ps)[from].Status.PodIP
	eventually(t, fmt.Sprintf("pod %s resolves %s to %s", from, peer, want), func(ctx context.Context) error {
		got, err := fetch(ctx, "http://"+ip+":8080/lookup?host="+url.QueryEscape(peer))
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("answers %q", got)
		}
		return nil
	})
	t.Logf("in pod %s: %s -> %s", from, peer, want)
}

// TestDNSNamesFollowPods: with spec.serviceName and a headless Service of
// that name, a real DNS server (CoreDNS, from the EndpointSlices the
// EndpointSlice controller writes from each pod's hostname and subdomain)
// answers <pod>.<service>.<namespace>.svc.cluster.local with the pod's IP;
// a pod resolves its peer by <pod>.<service> through the cluster DNS the
// kubelet gives it; an image updated in place keeps the IP and the name; a
// recreation gives a new IP, which the name follows; and a new serviceName
// recreates the pods under the new Service's names, the old ones gone.
func TestDNSNamesFollowPods(t *testing.T) {
	needDNS(t)
	t.Parallel()
	ns := newNamespace(t)
	for _, svc := range []string{"web-dns", "web-peers"} {
		if err := suite.client.Create(t.Context(), testenv.HeadlessService(ns, svc, "web")); err != nil {
			t.Fatal(err)
		}
	}
	ps := appPodSet(ns, "web", 2, app("v1"))
	ps.Spec.ServiceName = "web-dns"
	create(t, ps)
	waitReady(t, ps)
	first := identities(t, ps)
	waitDNS(t, ps, "web-dns", first)
	waitPeerLookup(t, ps, "web-0", "web-1.web-dns", first["web-1"].ip)

	// In place: the same pods, IPs and names.
	setImage(t, ps, app("v2"))
	waitReady(t, ps)
	checkAnswers(t, ps, "v2")
	if got := identities(t, ps); !maps.Equal(got, first) {
		t.Errorf("after an image in place: pods %v, want the same UIDs, IPs and nodes as %v", got, first)
	}
	waitDNS(t, ps, "web-dns", first)

	// Recreated by a change beyond images: new pods, new IPs, the same
	// names answering them.
	update(t, ps, func(ps *podsetv1alpha1.PodSet) {
		c := &ps.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "REVISION", Value: "recreated"})
	})
	waitReady(t, ps)
	second := identities(t, ps)
	for name, id := range second {
		if id.uid == first[name].uid || id.ip == first[name].ip {
			t.Errorf("pod %s after a recreation: UID %s, IP %s; before: UID %s, IP %s; want both new", name, id.uid, id.ip, first[name].uid, first[name].ip)
		}
	}
	waitDNS(t, ps, "web-dns", second)

	// A new serviceName: recreated under the new Service's names; the
	// old Service lists no pod, and its pod names are gone.
	update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "web-peers" })
	waitReady(t, ps)
	third := identities(t, ps)
	for name, id := range third {
		if id.uid == second[name].uid {
			t.Errorf("pod %s kept its UID %s through a new serviceName", name, id.uid)
		}
	}
	waitDNS(t, ps, "web-peers", third)
	waitNoName(t, podFQDN("web-0", "web-dns", ns))
	waitPeerLookup(t, ps, "web-1", "web-0.web-peers", third["web-0"].ip)
	if p := pods(t, ps)["web-1"]; p.Spec.Hostname != "web-1" || p.Spec.Subdomain != "web-peers" {
		t.Errorf("web-1 has hostname %q and subdomain %q, want web-1 and web-peers", p.Spec.Hostname, p.Spec.Subdomain)
	}

	// A pod on the second node, in its own network namespace, reaches
	// the cluster DNS on node 1's bridge through the host.
	if suite.realNodes < 2 {
		t.Log("one real node: a peer lookup from the second node's pods is not checked (REAL_NODES=2 checks it)")
		return
	}
	far := appPodSet(ns, "far", 1, app("v1"))
	far.Spec.Template.Spec.NodeSelector[corev1.LabelHostname] = secondNodeName
	create(t, far)
	waitReady(t, far)
	waitPeerLookup(t, far, "far-0", "web-0.web-peers", third["web-0"].ip)
}
