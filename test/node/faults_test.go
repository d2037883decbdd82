//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/localcluster"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// fault is what TestFaultsMidRollout does to the node, the control plane
// or the operator once the drain of a pod has begun (waitDrainBegun).
type fault struct {
	what   string
	inject func(t *testing.T)
	// outageCounted: requests that fail while the component is down are
	// counted and logged, not failures of the test (issue 31: the kubelet's
	// and the runtime's outages are "counted and explained"). Nothing the
	// operator does can stop a container then: a restart in place needs
	// the kubelet and the runtime, and a pod to delete waits 30 s for its
	// silent kubelet. A request that fails once the component is back,
	// when the operator's drains go on, fails the test.
	outageCounted bool
	// stopsPorts: the fault stops servers of the kwok cluster (kube-apiserver,
	// and on its return kube-controller-manager and kube-scheduler), whose
	// ports a cluster created meanwhile would be given: make test runs the
	// end-to-end and GitOps suites beside this one. No cluster is created
	// during the whole case (localcluster's creation lock), taken before the
	// rollout begins so that the fault still comes as soon as a gate closes.
	stopsPorts bool
}

// TestFaultsMidRollout: during an in-place rollout and during a
// scale-down of a PodSet behind a Service under the client load of
// TestZeroDroppedRequests, as soon as the drain of a pod has begun (the
// operator has closed its readiness gate for a restart in place, or
// deleted it in the scale-down: its hook holds it), the kubelet stops for 20 s, containerd stops and starts
// again, the operator is killed (SIGKILL) and started again, or
// kube-apiserver stops for 10 s. After each: every pod exists once under
// its name, none was recreated, lost or duplicated (the pods are watched
// for the whole test), the rollout completes, no readiness gate opened on
// the container it closed on, and no request failed (during the kubelet's
// and containerd's own outages failed requests are counted and logged:
// outageCounted).
//
// None fails because none of these stops what serves: containers run on
// without their kubelet and, through their shims, without containerd;
// kube-proxy's rules stay; the operator stops a container only once the
// pod is out of endpoints and the kubelet has said so itself, which a
// stopped kubelet cannot, and a stopped containerd only delays the
// restart that follows. Three settings keep it so, the thresholds well
// above the outages here: a kubelet of 1.35 or later (feature gate
// ChangeContainerStatusOnKubeletRestart off) keeps the readiness of the
// containers it finds running when it starts, where an older one
// reported them not Ready until their next probe; a kubelet whose runtime has not answered for 30 s reports its
// node NotReady, and the node lifecycle controller then marks every pod
// on it not Ready; a node whose kubelet has been silent for
// --node-monitor-grace-period (40 s and more) has the same end.
//
// kube-apiserver's outage (SIGTERM; it does not end its graceful
// termination within the 10 s, in which connections already open are
// still served, so hack/node.sh kills it, starts it again at once, and it
// answers /readyz some 20 s later) stops the EndpointSlices instead:
// kube-controller-manager and kube-scheduler exit when they cannot renew
// their leader lease for 10 s, and are started again (hack/node.sh
// resume, as a kubelet or systemd would); a new one waits out the old
// lease, 15 s, before it leads. Until then no EndpointSlice follows a
// pod's readiness, so the operator's drain waits for the slices to drop
// the pod, and counts drainSeconds from then (before it did, 22 to 52
// requests failed in each rollout).
//
// It runs alone, before the parallel tests, for the reason
// TestZeroDroppedRequests does, and because it stops what they use. The
// faults share one PodSet: each rollout starts from the one before, at
// rest.
func TestFaultsMidRollout(t *testing.T) {
	ns := newNamespace(t)
	ps := appPodSet(ns, "web", 4, app("v1"))
	ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
	create(t, ps)
	waitReady(t, ps)
	history := watchPodHistory(t, ns)
	endpoints := watchEndpoints(t, ns, "web")
	url := serve(t, ps)

	faults := []fault{
		{"the kubelet stopped for 20 s", func(t *testing.T) { pauseComponent(t, "kubelet", 20*time.Second) }, true, false},
		{"containerd stopped for 10 s", func(t *testing.T) { pauseComponent(t, "containerd", 10*time.Second) }, true, false},
		{"the operator killed", func(t *testing.T) { killOperator(t, nil) }, false, false},
		{"kube-apiserver stopped for 10 s", func(t *testing.T) { pauseComponent(t, "kube-apiserver", 10*time.Second) }, false, true},
	}
	image := "v1"
	for _, f := range faults {
		for _, inPlace := range []bool{true, false} {
			rollout := "an in-place rollout"
			if !inPlace {
				rollout = "a scale-down 4 -> 2"
			}
			t.Run(f.what+" during "+rollout, func(t *testing.T) {
				if f.stopsPorts {
					defer lockClusterCreation(t)()
				}
				stay, gone := staysAndGoes(t, ps, inPlace)
				versions := []string{image}
				do := func() { update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](2) }) }
				if inPlace {
					image = map[string]string{"v1": "v2", "v2": "v1"}[image]
					versions = append(versions, image)
					do = func() { setImage(t, ps, app(image)) }
				}
				from := history.mark()
				endpoints.reset()
				var began, faultAt, backAt time.Time
				load := underLoad(t, ps, url, func() {
					began = time.Now()
					do()
					waitDrainBegun(t, history, from)
					faultAt = time.Now()
					f.inject(t)
					backAt = time.Now()
					if stopped := history.stopped(from, faultAt, time.Duration(podsetv1alpha1.DefaultDrainSeconds)*time.Second); len(stopped) > 0 {
						t.Errorf("the fault came after the drain: %v had stopped", stopped)
					}
				})
				left, entered := endpoints.moves()
				t.Logf("%s during %s: %d requests, %d failed, rollout %v (fault %v after it began, back %v later), answers %v; ready endpoints left %v, entered %v",
					f.what, rollout, load.total, len(load.failures), load.took.Round(time.Millisecond),
					faultAt.Sub(began).Round(time.Millisecond), backAt.Sub(faultAt).Round(time.Millisecond),
					load.answers, left, entered)
				events := history.since(from)
				reportFaultFailures(t, f, load, faultAt, backAt, endpoints, events)
				load.checkOnly(t, versions...)
				checkPodNames(t, events, stay, gone)
				checkGates(t, history.since(0), from)
				if !inPlace {
					update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](4) })
					waitReady(t, ps)
				}
			})
		}
	}
	// Between the faults too (the scale-ups back to 4), no pod had
	// another name.
	names := []string{"web-0", "web-1", "web-2", "web-3"}
	for _, e := range history.since(0) {
		if !slices.Contains(names, e.name) {
			t.Errorf("%s: pod %s appeared, want only %v", e.at.Format("15:04:05.000"), e.name, names)
		}
	}
}

// lockClusterCreation holds the lock on local clusters' creation (kwokctl
// would give a cluster created meanwhile the ports of a component the test
// stops) and returns what releases it.
func lockClusterCreation(t *testing.T) func() {
	t.Helper()
	unlock, err := localcluster.Cluster{Root: suite.root}.LockCreation()
	if err != nil {
		t.Fatal(err)
	}
	return unlock
}

// staysAndGoes is, by name, the UIDs of the pods of ps that stay through
// a rollout in place or a scale-down 4 -> 2, and of those the scale-down
// deletes.
func staysAndGoes(t *testing.T, ps *podsetv1alpha1.PodSet, inPlace bool) (stay, gone map[string]string) {
	t.Helper()
	stay, gone = map[string]string{}, map[string]string{}
	for name, p := range pods(t, ps) {
		stay[name] = string(p.UID)
	}
	if !inPlace {
		for _, name := range []string{"web-2", "web-3"} {
			gone[name] = stay[name]
			delete(stay, name)
		}
	}
	return stay, gone
}

// reportFaultFailures reports the requests that failed under fault f,
// injected at faultAt and over at backAt: errors, but for those during an
// outage the fault counts (outageCounted), which are logged.
func reportFaultFailures(t *testing.T, f fault, load load, faultAt, backAt time.Time, endpoints *endpointLog, events []podEvent) {
	t.Helper()
	if len(load.failures) == 0 {
		return
	}
	report := t.Errorf
	if last := load.failedAt[len(load.failedAt)-1]; f.outageCounted && last.Before(backAt) {
		report = t.Logf // during the outage: counted, see outageCounted
	}
	report("%d of %d requests failed (fault at %s, back at %s), the last %v after it was back; first ones:\n%s\nthe pods, from the change (seconds from the fault):\n%s",
		len(load.failures), load.total, faultAt.Format("15:04:05.000"), backAt.Format("15:04:05.000"),
		load.failedAt[len(load.failedAt)-1].Sub(backAt).Round(time.Millisecond), load.firstFailures(endpoints),
		faultTimeline(events, faultAt))
}

// faultTimeline is the pods' events, one a line, timed from the fault: what
// a failure during a fault is read against (when each gate closed, each
// image went on, each container restarted).
func faultTimeline(events []podEvent, faultAt time.Time) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%+.3f %s gate %s ready %s images %s container %s deleted %v terminating %v\n",
			e.at.Sub(faultAt).Seconds(), e.name, e.gate, e.ready, e.images, e.container, e.deleted, e.terminating)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// pauseComponent stops the kubelet, containerd or kube-apiserver by its
// PID (hack/node.sh pause), and starts it again as it ran d after the
// signal that stopped it. A test that fails in between leaves it to
// hack/node.sh down to start it again before it takes the node down.
func pauseComponent(t *testing.T, what string, d time.Duration) {
	t.Helper()
	stop := time.Now()
	if _, err := nodeScript("pause", what); err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(stop)
	time.Sleep(d - stopped)
	start := time.Now()
	out, err := nodeScript("resume", what)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: exited %v after SIGTERM, started again %v after it, served %v later; %s", what, stopped.Round(time.Millisecond),
		start.Sub(stop).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), strings.ReplaceAll(strings.TrimSpace(out), "\n", ", "))
}

// apiServerAddress is the host and port of the cluster's kube-apiserver.
func apiServerAddress(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// waitDrainBegun waits until the drain of a pod has begun since event
// from: the operator has closed its readiness gate (before a restart in
// place) or deleted it (a scale-down: the kubelet holds its containers in
// the drain hook while the terminating pod is out of endpoints).
func waitDrainBegun(t *testing.T, h *podHistory, from int) {
	t.Helper()
	testenv.Waiter{Timeout: waitTimeout, Interval: 20 * time.Millisecond}.Eventually(t, "a pod drains", func(context.Context) error {
		for _, e := range h.since(from) {
			if e.gate == corev1.ConditionFalse || e.terminating {
				return nil
			}
		}
		return errors.New("no gate closed, no pod deleted")
	})
}

// podEvent is a pod as a watch event showed it.
type podEvent struct {
	at                time.Time
	name, uid         string
	deleted           bool
	terminating       bool
	generation        int64
	gate, ready       corev1.ConditionStatus
	container, images string
}

// podHistory is every event of a namespace's pods, in order.
type podHistory struct {
	mu     sync.Mutex
	events []podEvent
}

// watchPodHistory records the events of the pods of ns until the test
// ends.
func watchPodHistory(t *testing.T, ns string) *podHistory {
	t.Helper()
	h := &podHistory{}
	stop := watchPods(t, ns, func(typ watch.EventType, p *corev1.Pod, at time.Time) {
		e := podEvent{at: at, name: p.Name, uid: string(p.UID), deleted: typ == watch.Deleted,
			terminating: p.DeletionTimestamp != nil, generation: p.Generation}
		if c := podCondition(p, podsetv1alpha1.InPlaceUpdateReadyCondition); c != nil {
			e.gate = c.Status
		}
		if c := podCondition(p, corev1.PodReady); c != nil {
			e.ready = c.Status
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "app" {
				e.container, e.images = s.ContainerID, s.Image
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, e)
	})
	t.Cleanup(stop)
	return h
}

// mark is the index of the next event.
func (h *podHistory) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

// since is the events from index from on.
func (h *podHistory) since(from int) []podEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events[from:])
}

// stopped lists the pods whose container was stopped, for an image
// change (the operator changed their spec) or a deletion, between event
// from and time at: the kubelet stops a container hold (the drain hook's
// sleep) after either.
func (h *podHistory) stopped(from int, at time.Time, hold time.Duration) []string {
	first := map[string]int64{}
	var out []string
	for _, e := range h.since(from) {
		if e.at.After(at) {
			break
		}
		g, seen := first[e.uid]
		if !seen {
			first[e.uid] = e.generation
		}
		if ((seen && e.generation > g) || e.terminating) && at.Sub(e.at) >= hold || e.deleted {
			if !slices.Contains(out, e.name) {
				out = append(out, e.name)
			}
		}
	}
	return out
}

// checkPodNames fails unless events show only the pods of stay, which
// remain (same UID, never deleted), and of gone, which are deleted once
// and do not come back, each by name and UID.
func checkPodNames(t *testing.T, events []podEvent, stay, gone map[string]string) {
	t.Helper()
	deleted := map[string]bool{}
	for _, e := range events {
		uid, staying := stay[e.name]
		if !staying {
			uid = gone[e.name]
		}
		switch {
		case uid == "":
			t.Errorf("%s: pod %s (%s) appeared, want only %v and %v", e.at.Format("15:04:05.000"), e.name, e.uid, slices.Sorted(maps.Keys(stay)), slices.Sorted(maps.Keys(gone)))
		case e.uid != uid:
			t.Errorf("%s: pod %s is %s, a new pod: it was %s", e.at.Format("15:04:05.000"), e.name, e.uid, uid)
		case staying && (e.deleted || e.terminating):
			t.Errorf("%s: pod %s, which stays, is deleted", e.at.Format("15:04:05.000"), e.name)
		case deleted[e.name]:
			t.Errorf("%s: pod %s came back after its deletion", e.at.Format("15:04:05.000"), e.name)
		case e.deleted:
			deleted[e.name] = true
		}
	}
	for name := range gone {
		if !deleted[name] {
			t.Errorf("pod %s was never deleted", name)
		}
	}
}

// checkGates fails if, from event from on, a pod's readiness gate opened
// while the pod still ran the container it had when the gate closed.
func checkGates(t *testing.T, events []podEvent, from int) {
	t.Helper()
	type state struct {
		gate     corev1.ConditionStatus
		closedOn string
	}
	pods := map[string]*state{}
	for i, e := range events {
		s, seen := pods[e.uid]
		if !seen {
			s = &state{gate: e.gate, closedOn: e.container}
			pods[e.uid] = s
			continue
		}
		if s.gate != corev1.ConditionFalse && e.gate == corev1.ConditionFalse {
			s.closedOn = e.container
		}
		if i >= from && s.gate == corev1.ConditionFalse && e.gate == corev1.ConditionTrue && e.container == s.closedOn {
			t.Errorf("%s: pod %s: its gate opened on the container it closed on, %s (%s)", e.at.Format("15:04:05.000"), e.name, e.container, e.images)
		}
		s.gate = e.gate
	}
}
