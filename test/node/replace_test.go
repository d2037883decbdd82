//go:build node

package node

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestReplaceMovesAPodOffItsNode: on two real nodes, a PodSet of 2 pods,
// one on each, behind a Service, under the client load of
// TestZeroDroppedRequests, with an app that has no preStop hook. The
// second node is cordoned, as before moving work off a bad node, and
// `kubectl podset replace` asks for its pod: the operator deletes it
// within maxUnavailable (its containers sleep in the operator's preStop
// hook while it leaves the Service), and makes it again under its name;
// the scheduler puts it on the first node. No request fails.
func TestReplaceMovesAPodOffItsNode(t *testing.T) {
	needNodes(t, 2)
	ns := newNamespace(t)
	ps := appPodSet(ns, "web", 2, app("v1"))
	spreadOverNodes(ps, corev1.DoNotSchedule)
	// A cordoned node is no domain to spread over: the replaced pod may
	// join the other on the first node.
	ps.Spec.Template.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
	create(t, ps)
	waitReady(t, ps)
	on := nodesOf(t, ps)
	t.Logf("pods by node: %v", on)
	if len(on[nodeName]) != 1 || len(on[secondNodeName]) != 1 {
		t.Fatalf("want one pod on each node: %v", on)
	}
	moving := on[secondNodeName][0]
	old := pods(t, ps)[moving]
	endpoints := watchEndpoints(t, ns, "web")
	url := serve(t, ps)

	kubectl(t, "cordon", secondNodeName)
	t.Cleanup(func() { _, _ = execKubectl("uncordon", secondNodeName) })
	endpoints.reset()
	load := underLoad(t, ps, url, func() {
		out, err := runPlugin(t, "replace", moving, "-n", ns, "--podset", "web")
		if err != nil {
			t.Fatalf("kubectl podset replace %s: %v\n%s", moving, err, out)
		}
		t.Logf("kubectl podset replace %s: %s", moving, out)
		eventually(t, moving+" made again", func(context.Context) error {
			if p, ok := pods(t, ps)[moving]; !ok || p.UID == old.UID || p.DeletionTimestamp != nil {
				return errors.New("not made again yet")
			}
			return nil
		})
	})
	now := pods(t, ps)[moving]
	t.Logf("replace %s: %d requests, %v until Ready again, %d failed, answers %v; %s on %s (was %s); pods by node after: %v",
		moving, load.total, load.took.Round(time.Millisecond), len(load.failures), load.answers, moving, now.Spec.NodeName, old.Spec.NodeName, nodesOf(t, ps))
	if len(load.failures) > 0 {
		t.Errorf("%d of %d requests failed during the replacement; first ones:\n%s", len(load.failures), load.total, load.firstFailures(endpoints))
	}
	load.checkOnly(t, "v1")
	if now.Spec.NodeName != nodeName {
		t.Errorf("%s came back on %q, want %s (its node %s is cordoned)", moving, now.Spec.NodeName, nodeName, secondNodeName)
	}
	if _, ok := now.Labels["podset.dev/replace"]; ok {
		t.Errorf("the new %s carries podset.dev/replace", moving)
	}
}
