package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memoryResult is the in-process operator's live heap (runtime.GC, then
// HeapAlloc) before its manager starts and after each converged state.
type memoryResult struct {
	base, h1, h2, h3  uint64
	n1, n2, unrelated int
	err               error
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// perPod is the heap growth from the baseline per managed pod.
func (m *memoryResult) perPod(h uint64, n int) float64 {
	return (float64(h) - float64(m.base)) / float64(n)
}

// unrelatedGrowth is the heap the unrelated pods added, relative to the
// operator's heap (above the baseline) with its own pods alone.
func (m *memoryResult) unrelatedGrowth() float64 {
	return (float64(m.h3) - float64(m.h2)) / (float64(m.h2) - float64(m.base))
}

// memory measures the in-process operator's heap with n1 and n2 managed
// pods, then with as many unrelated pods (no PodSet label) in the same
// namespace. Only PodSets are watched by the benchmark meanwhile, so its
// own heap holds no pods.
type memory struct{}

func (memory) phase() string { return "memory" }

func (memory) run(ctx context.Context, b *bench) result {
	logf("== memory")
	s := b.size
	res := &memoryResult{n1: int(s.memSets * s.mem1), n2: int(s.memSets * s.mem2), unrelated: int(s.unrelated)}
	res.err = func() error {
		if err := b.c.up(ctx, s.memNodes); err != nil {
			return err
		}
		ns, err := b.c.namespace(ctx, "mem")
		if err != nil {
			return err
		}
		defer func() {
			obs, err := newObserver(ctx, b.c, []string{ns}, kindPods)
			if err == nil {
				err = b.clear(ctx, obs, ns)
				obs.stop()
			}
			if err != nil {
				b.fail("memory: cleaning up: %v", err)
			}
		}()
		obs, err := newObserver(ctx, b.c, []string{ns}, kindPodSets)
		if err != nil {
			return err
		}
		defer obs.stop()

		res.base = heap()
		op, err := startInProcess(ctx, b.c, []string{ns}, nil)
		if err != nil {
			return err
		}
		defer func() { _ = op.Stop() }()

		wctx, cancel := context.WithTimeout(ctx, 2*b.size.timeout)
		defer cancel()
		j := job{ns: ns, sets: setNames(s.memSets), n: s.mem1}
		if _, err := b.createPodSets(ctx, j, ""); err != nil {
			return err
		}
		// managed waits until every PodSet is done and Ready at j.n pods
		// (n in all), then for the manager to settle, and reads the heap.
		managed := func(n int) (uint64, error) {
			if err := obs.waitFor(wctx, fmt.Sprintf("%d managed pods", n), func(st *state) bool {
				return setsDone(st.podsets, j, func(x setState, n int32) bool { return x.done(n) && x.readyCondition })
			}); err != nil {
				return 0, err
			}
			time.Sleep(2 * settle)
			return heap(), nil
		}
		if res.h1, err = managed(res.n1); err != nil {
			return err
		}
		logf("memory: heap %d B before the manager, %d B with %d managed pods", res.base, res.h1, res.n1)

		if err := scalePodSets(ctx, b.c.cl, j, s.mem2); err != nil {
			return err
		}
		j.n = s.mem2
		if res.h2, err = managed(res.n2); err != nil {
			return err
		}
		logf("memory: heap %d B with %d managed pods", res.h2, res.n2)

		if err := b.createUnrelated(ctx, ns, int(s.unrelated)); err != nil {
			return err
		}
		// kwok marks them running meanwhile; the operator's cache selects
		// on the PodSet label on the API server, so none of it reaches it.
		time.Sleep(4 * settle)
		res.h3 = heap()
		logf("memory: heap %d B with %d managed and %d unrelated pods", res.h3, res.n2, res.unrelated)
		return nil
	}()
	if res.err != nil {
		b.fail("memory: %v", res.err)
	}
	return res
}

// createUnrelated creates pods without the PodSet label, bound to the kwok
// nodes round robin (kwok runs them whatever the node's capacity), so they
// run without loading the scheduler.
func (b *bench) createUnrelated(ctx context.Context, ns string, n int) error {
	nodes, err := b.c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(nodes.Items) == 0 {
		return fmt.Errorf("no nodes")
	}
	spec := hardenedSpec(template("unrelated", 1).Spec)
	return parallel(n, 32, func(i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns,
				Name:      "unrelated-" + strconv.Itoa(i),
				Labels:    map[string]string{"app.kubernetes.io/name": "unrelated"},
			},
			Spec: *spec.DeepCopy(),
		}
		pod.Spec.NodeName = nodes.Items[i%len(nodes.Items)].Name
		_, err := b.c.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{FieldManager: benchFieldManager})
		return err
	})
}

func (m *memoryResult) rows(*bench) []row {
	title := "memory: Go heap after GC, above the heap before the manager started"
	r := func(contender, measured, check, target string, ok bool) row {
		r := dashRow(title, contender)
		r.measured, r.check, r.target, r.result = measured, check, target, metStr(ok)
		return r
	}
	if m.err != nil {
		return []row{r("podset (in-process)", "failed: "+shortErr(m.err), "—", "—", false)}
	}
	const kib = 1024.0
	p1, p2 := m.perPod(m.h1, m.n1), m.perPod(m.h2, m.n2)
	marginal := (float64(m.h2) - float64(m.h1)) / float64(m.n2-m.n1)
	growth := m.unrelatedGrowth()
	return []row{
		r("podset (in-process)", fmt.Sprintf("%.1f MiB", (float64(m.h1)-float64(m.base))/kib/kib),
			fmt.Sprintf("%d managed pods: %.2f KiB per pod", m.n1, p1/kib), "≤ 4 KiB per pod", p1 <= 4*kib),
		r("podset (in-process)", fmt.Sprintf("%.1f MiB", (float64(m.h2)-float64(m.base))/kib/kib),
			fmt.Sprintf("%d managed pods: %.2f KiB per pod (%.2f KiB per pod from %d to %d)", m.n2, p2/kib, marginal/kib, m.n1, m.n2), "≤ 4 KiB per pod", p2 <= 4*kib),
		r("podset (in-process)", fmt.Sprintf("%+.2f MiB", (float64(m.h3)-float64(m.h2))/kib/kib),
			fmt.Sprintf("+%d unrelated pods: %+.2f%%", m.unrelated, 100*growth), "< 5%", growth < 0.05),
	}
}
