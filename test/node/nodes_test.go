//go:build node

package node

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// lostNodeTimeout bounds the wait for a lost node's pods to come back
// elsewhere: kube-controller-manager marks a node lost 50 s after its
// last heartbeat (hack/node.sh), the kubelet sends one every 10 s, and
// the replacements then start and pass their probes.
const lostNodeTimeout = 3 * time.Minute

// TestSpreadAndLostNode: on two real nodes, a PodSet whose pods spread
// over hostnames (maxSkew 1, ScheduleAnyway) runs on both, and every pod
// answers through a ClusterIP Service. Then node 2 is lost for real: its
// kubelet and containerd are killed. With spec.lostNodeReplacement set,
// once kube-controller-manager marks the node lost, node 2's pods come
// back on node 1 under their names, node 1's keep running, and the
// Service answers from the new pods. The client's failed requests are
// counted; none may fail once the replacements are Ready. The old copies
// run on node 2 until it is back, and its kubelet then stops them.
//
// It runs with the parallel tests, whose pods all run on node 1
// (appPodSet): most of it is the wait for kube-controller-manager to mark
// node 2 lost.
func TestSpreadAndLostNode(t *testing.T) {
	needNodes(t, 2)
	t.Parallel()
	ns := newNamespace(t)
	ps := appPodSet(ns, "web", 4, app("v1"))
	spreadOverNodes(ps, corev1.ScheduleAnyway)
	ps.Spec.LostNodeReplacement = &podsetv1alpha1.LostNodeReplacement{AfterSeconds: ptr.To[int32](0)}
	create(t, ps)
	waitReady(t, ps)

	before := identities(t, ps)
	onNode := checkSpread(t, ps)
	url := serve(t, ps)
	checkEveryPodAnswers(t, ps, url)

	tr := startTraffic(url)
	time.Sleep(time.Second)
	killedAt := time.Now()
	if out, err := nodeScript("kill-node", "2"); err != nil {
		t.Fatal(err)
	} else {
		t.Log(strings.TrimSpace(out))
	}
	revived := false
	t.Cleanup(func() {
		if !revived {
			reviveNode(t, 2, secondNodeName)
		}
	})

	lostAt := waitNodeLost(t, secondNodeName)
	t.Logf("%s lost %v after its kubelet and containerd were killed", secondNodeName, lostAt.Sub(killedAt).Round(time.Millisecond))
	moved := onNode[secondNodeName]
	testenv.Waiter{Timeout: lostNodeTimeout, Interval: 500 * time.Millisecond, Log: true}.Eventually(t,
		fmt.Sprintf("pods %v are back on %s under their names", moved, nodeName), func(context.Context) error {
			now := identities(t, ps)
			for name, was := range before {
				id, ok := now[name]
				switch {
				case !ok:
					return fmt.Errorf("%s is missing", name)
				case was.node == nodeName && id.uid != was.uid:
					return fmt.Errorf("%s, on %s, was replaced", name, nodeName)
				case was.node == secondNodeName && (id.uid == was.uid || id.node != nodeName):
					return fmt.Errorf("%s is %s on %q", name, id.uid, id.node)
				}
			}
			return nil
		})
	waitReady(t, ps)
	recoveredAt := time.Now()
	t.Logf("node 2's pods back and the PodSet Ready %v after the kill, %v after the node was marked lost",
		recoveredAt.Sub(killedAt).Round(time.Millisecond), recoveredAt.Sub(lostAt).Round(time.Millisecond))
	checkEveryPodAnswers(t, ps, url)
	time.Sleep(2 * time.Second)
	total, failures, answers := tr.finish()

	t.Logf("%d requests through the Service from 1 s before the kill to 2 s after the recovery, %d failed, answers %v",
		total, len(failures), answers)
	for i, f := range failures {
		at := tr.failedAt[i]
		report := t.Logf
		if at.After(recoveredAt) {
			report = t.Errorf // the replacements were Ready: traffic must have recovered
		}
		report("failed request, %v after the kill: %s", at.Sub(killedAt).Round(time.Millisecond), f)
	}
	checkOnly(t, answers, "v1")
	cur := &podsetv1alpha1.PodSet{}
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), cur); err != nil {
		t.Fatal(err)
	}
	if got := cur.Status.LostNodeReplacements; int(got) != len(moved) {
		t.Errorf("status.lostNodeReplacements is %d, want %d (the pods of %s)", got, len(moved), secondNodeName)
	}

	// Until node 2 is back, the old copies of its pods run on there,
	// unwatched (docs/usage.md); back, its kubelet stops them.
	var oldUIDs []string
	for _, name := range moved {
		oldUIDs = append(oldUIDs, before[name].uid)
	}
	if n := podProcesses(secondNodeName, oldUIDs); n == 0 {
		t.Errorf("no process of the old copies of %v runs on %s before it is back", moved, secondNodeName)
	} else {
		t.Logf("%d processes of the old copies of %v run on %s before it is back", n, moved, secondNodeName)
	}
	revivedAt := time.Now()
	revived = true
	reviveNode(t, 2, secondNodeName)
	eventually(t, "the old copies on "+secondNodeName+" stop", func(context.Context) error {
		if n := podProcesses(secondNodeName, oldUIDs); n > 0 {
			return fmt.Errorf("%d processes of the old copies still run on %s", n, secondNodeName)
		}
		return nil
	})
	t.Logf("the old copies on %s stopped %v after its kubelet and containerd were started again",
		secondNodeName, time.Since(revivedAt).Round(time.Millisecond))
}

// podProcesses counts the processes of the pods of uids on a real node:
// those in the pods' cgroups, under the node's cgroup root (hack/node.sh
// names it after the node), in cgroup v1's pids hierarchy or in v2's.
func podProcesses(node string, uids []string) int {
	n := 0
	for _, uid := range uids {
		for _, root := range []string{"/sys/fs/cgroup/pids/" + node, "/sys/fs/cgroup/" + node} {
			for _, pattern := range []string{"/kubepods/pod" + uid + "/*/cgroup.procs", "/kubepods/*/pod" + uid + "/*/cgroup.procs"} {
				files, _ := filepath.Glob(root + pattern)
				for _, f := range files {
					if procs, err := os.ReadFile(f); err == nil {
						n += len(strings.Fields(string(procs)))
					}
				}
			}
		}
	}
	return n
}

// waitNodeLost waits until kube-controller-manager marks the node lost
// (its Ready condition Unknown) and returns when it did.
func waitNodeLost(t *testing.T, name string) time.Time {
	t.Helper()
	var at time.Time
	testenv.Waiter{Timeout: lostNodeTimeout, Interval: 500 * time.Millisecond, Log: true}.Eventually(t, name+" is lost", func(ctx context.Context) error {
		n := &corev1.Node{}
		if err := suite.client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
				at = c.LastTransitionTime.Time
				return nil
			}
		}
		return fmt.Errorf("%s is not lost yet", name)
	})
	return at
}

// reviveNode starts the kubelet and containerd of real node i again
// (hack/node.sh revive-node) and waits until the node is Ready, so that
// the tests after this one find it whole; its kubelet then stops the
// copies of the pods that ran on there, deleted meanwhile.
func reviveNode(t *testing.T, i int, name string) {
	t.Helper()
	out, err := nodeScript("revive-node", strconv.Itoa(i))
	if err != nil {
		t.Error(err)
		return
	}
	t.Log(strings.TrimSpace(out))
	if out, err := execKubectl("wait", "--for=condition=Ready", "node/"+name, "--timeout=2m"); err != nil {
		t.Errorf("%s is not Ready again: %v\n%s", name, err, out)
	}
}

// checkEveryPodAnswers sends requests to the Service at url until each
// pod of the PodSet has answered one, the pod being the source of the
// reply in the kernel's conntrack entry of the request's connection (the
// backend kube-proxy chose); it fails on a request that fails, is
// answered by no pod of the PodSet, or when a pod has not answered after
// 200 requests.
func checkEveryPodAnswers(t *testing.T, ps *podsetv1alpha1.PodSet, url string) {
	t.Helper()
	byIP := map[string]string{}
	for name, p := range pods(t, ps) {
		byIP[p.Status.PodIP] = name
	}
	answered := map[string]int{}
	for range 200 {
		ip, err := backendOf(url)
		if err != nil {
			t.Errorf("a request to %s: %v", url, err)
			continue
		}
		name, ok := byIP[ip]
		if !ok {
			t.Errorf("a request to %s was answered by %s, no pod of the PodSet (%v)", url, ip, byIP)
			continue
		}
		answered[name]++
		if len(answered) == len(byIP) {
			break
		}
	}
	t.Logf("answers through the Service by pod: %v", answered)
	for ip, name := range byIP {
		if answered[name] == 0 {
			t.Errorf("pod %s (%s) never answered through the Service; pods by IP: %v", name, ip, slices.Sorted(maps.Keys(byIP)))
		}
	}
}

// backendOf sends one request to url and returns the address of the pod
// that answered it: the reply's source in the conntrack entry of its
// connection.
func backendOf(url string) (string, error) {
	a := &attempt{}
	trace := &httptrace.ClientTrace{ConnectStart: func(_, addr string) { a.mu.Lock(); a.remote = addr; a.mu.Unlock() }}
	if _, err := fetch(httptrace.WithClientTrace(context.WithValue(context.Background(), attemptKey{}, a), trace), url); err != nil {
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	entries := conntrack(strconv.Itoa(a.port), a.remote)
	for e := range strings.SplitSeq(entries, " | ") {
		var sources []string
		for _, f := range strings.Fields(e) {
			if v, ok := strings.CutPrefix(f, "src="); ok {
				sources = append(sources, v)
			}
		}
		if len(sources) == 2 {
			return sources[1], nil
		}
	}
	return "", fmt.Errorf("no conntrack entry of its connection from port %d to %s: %s", a.port, a.remote, entries)
}
