//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// TestStopsByOthersAreDrained: a client sending requests through a
// ClusterIP Service, a new connection every 10 ms, gets an answer to every
// one while others stop the PodSet's pods, for an app that has no preStop
// hook: evictions one after the other as kubectl drain sends them (the
// PodSet's own disruptionBudget, maxUnavailable 1, holds the second until
// the first pod is back), a kubectl delete pod, and a kubectl delete pod
// while the operator is down. Each pod's containers sleep drainSeconds in
// the operator's preStop hook while the EndpointSlice controller lists the
// terminating pod as not ready, so kube-proxy stops routing to it before
// the app gets SIGTERM, whoever stopped it and whether the operator runs.
//
// It runs alone, before the parallel tests, as TestZeroDroppedRequests.
func TestStopsByOthersAreDrained(t *testing.T) {
	ns := newNamespace(t)
	ps := appPodSet(ns, "web", 4, app("v1"))
	ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	create(t, ps)
	waitReady(t, ps)
	for name, p := range pods(t, ps) {
		hook := p.Spec.Containers[0].Lifecycle
		if hook == nil || hook.PreStop == nil || hook.PreStop.Sleep == nil || hook.PreStop.Sleep.Seconds != podsetv1alpha1.DefaultDrainSeconds {
			t.Fatalf("pod %s: container app has lifecycle %+v, want the operator's preStop sleep of %d s", name, hook, podsetv1alpha1.DefaultDrainSeconds)
		}
	}
	endpoints := watchEndpoints(t, ns, "web")
	url := serve(t, ps)
	eventually(t, "the PodSet's PodDisruptionBudget allows one disruption", func(ctx context.Context) error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := suite.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, pdb); err != nil {
			return err
		}
		if pdb.Status.DisruptionsAllowed != 1 || pdb.Status.ObservedGeneration != pdb.Generation {
			return fmt.Errorf("status %+v", pdb.Status)
		}
		return nil
	})

	for _, step := range []struct {
		what string
		do   func(t *testing.T)
	}{
		{"two evictions one after the other, as kubectl drain sends them", func(t *testing.T) {
			first := evict(t, ns, "web-3")
			second := evict(t, ns, "web-2")
			t.Logf("eviction of web-3 refused %d times, of web-2 %d times (429, the budget) before it was accepted", first, second)
			if second == 0 {
				t.Errorf("the eviction of web-2 was accepted at once, while web-3 was still away: the budget (maxUnavailable 1) did not hold it")
			}
		}},
		{"kubectl delete pod", func(t *testing.T) {
			kubectl(t, "delete", "pod", "-n", ns, "web-1")
		}},
		{"kubectl delete pod while the operator is down", func(t *testing.T) {
			killOperator(t, func() { kubectl(t, "delete", "pod", "-n", ns, "web-0") })
		}},
	} {
		t.Run(step.what, func(t *testing.T) {
			endpoints.reset()
			load := underLoad(t, ps, url, func() { step.do(t) })
			t.Logf("%s: %d requests, %v until Ready again, %d failed, answers %v", step.what, load.total, load.took.Round(time.Millisecond), len(load.failures), load.answers)
			if len(load.failures) > 0 {
				t.Errorf("%d of %d requests failed during %s; first ones:\n%s", len(load.failures), load.total, step.what, load.firstFailures(endpoints))
			}
			load.checkOnly(t, "v1")
		})
	}
}

// evict asks the eviction API to evict pod name, as kubectl drain does:
// again every second while the PodDisruptionBudget refuses it (429), and
// returns how many times it was refused. It returns once the pod is gone.
func evict(t *testing.T, ns, name string) (refused int) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := suite.client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	uid := pod.UID
	deadline := time.Now().Add(waitTimeout)
	for {
		err := suite.client.SubResource("eviction").Create(t.Context(), pod, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		})
		if err == nil {
			break
		}
		if !apierrors.IsTooManyRequests(err) || time.Now().After(deadline) {
			t.Fatalf("evicting pod %s: %v", name, err)
		}
		refused++
		time.Sleep(time.Second)
	}
	eventually(t, "pod "+name+" is gone", func(ctx context.Context) error {
		p := &corev1.Pod{}
		err := suite.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)
		if apierrors.IsNotFound(err) || err == nil && p.UID != uid {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	return refused
}

// killOperator kills the suite's operator (SIGKILL), runs meanwhile while
// it is down, and starts it again.
func killOperator(t *testing.T, meanwhile func()) {
	t.Helper()
	suite.stopOperator(syscall.SIGKILL)
	suite.stopOperator = func(syscall.Signal) {}
	if meanwhile != nil {
		meanwhile()
	}
	stop, err := startOperator(suite.operatorDir, true)
	if err != nil {
		t.Fatalf("starting the operator again: %v", err)
	}
	suite.stopOperator = stop
}
