package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// scrape gathers the operator's registry, as its metrics endpoint serves
// it, and returns the samples of one namespace's PodSets, each as
// `name{label="value",...}` (labels sorted, namespace left out) to its
// value; a histogram as its _count.
func scrape(t *testing.T, ns string) map[string]float64 {
	t.Helper()
	families, err := testenv.GatherMetrics(ctrlmetrics.Registry)
	if err != nil {
		t.Fatal(err)
	}
	samples := map[string]float64{}
	for name, f := range families {
		if f.GetType() == dto.MetricType_HISTOGRAM {
			name += "_count"
		}
		for _, m := range f.GetMetric() {
			var labels []string
			inNamespace := false
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" {
					inNamespace = l.GetValue() == ns
					continue
				}
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if !inNamespace {
				continue
			}
			slices.Sort(labels)
			samples[name+"{"+strings.Join(labels, ",")+"}"] = testenv.Value(f, m)
		}
	}
	return samples
}

// statusSamples is what the status gauges of a PodSet should say.
func statusSamples(ps *podsetv1alpha1.PodSet) map[string]float64 {
	s := ps.Status
	id := fmt.Sprintf("podset=%q", ps.Name)
	want := map[string]float64{
		"podset_spec_replicas{" + id + "}":                                                   float64(*ps.Spec.Replicas),
		"podset_status_replicas{" + id + "}":                                                 float64(s.Replicas),
		"podset_status_replicas_ready{" + id + "}":                                           float64(s.ReadyReplicas),
		"podset_status_replicas_available{" + id + "}":                                       float64(s.AvailableReplicas),
		"podset_status_replicas_updated{" + id + "}":                                         float64(s.UpdatedReplicas),
		"podset_status_last_progress_time_seconds{" + id + "}":                               float64(s.LastProgressTime.Unix()),
		fmt.Sprintf("podset_status_current_revision{%s,revision=%q}", id, s.CurrentRevision): 1,
		fmt.Sprintf("podset_status_update_revision{%s,revision=%q}", id, s.UpdateRevision):   1,
	}
	for _, typ := range []string{podsetv1alpha1.ReadyCondition, podsetv1alpha1.ReconcilingCondition, podsetv1alpha1.StalledCondition} {
		c := testenv.Condition(ps, typ)
		for _, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
			v := 0.0
			if st == c.Status {
				v = 1
			}
			want[fmt.Sprintf("podset_status_condition{condition=%q,%s,reason=%q,status=%q}", typ, id, c.Reason, strings.ToLower(string(st)))] = v
		}
	}
	return want
}

// only keeps the samples whose name starts with one of prefixes.
func only(samples map[string]float64, prefixes ...string) map[string]float64 {
	kept := map[string]float64{}
	for k, v := range samples {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				kept[k] = v
			}
		}
	}
	return kept
}

func TestMetricsShowThePodSetStatusAndGoWithIt(t *testing.T) {
	t.Parallel()
	ns, _ := kubeletNamespace(t)
	ps := createRunning(t, fixture.PodSet(ns, "web").Replicas(2).MaxUnavailable(1))
	changeTemplate(t, ps, func(tmpl *corev1.PodTemplateSpec) { tmpl.Spec.Containers[0].Image = "busybox:1.37" })
	waitForRollout(t, ps, "busybox:1.37")

	// The status gauges say what the PodSet's status says.
	eventually(t, "status gauges equal to the status", func(context.Context) error {
		want := statusSamples(get(t, ps))
		if diff := cmp.Diff(want, only(scrape(t, ns), "podset_spec_", "podset_status_")); diff != "" {
			return errors.New("gauges differ from status (-status +scrape):\n" + diff)
		}
		return nil
	})

	// The operator's own work: two pods created, each with its gate
	// opened, then updated in place for the image behind its gate (closed,
	// then opened again), and two rollouts timed: the creation and the
	// image change.
	// Status writes: at least the two Ready=True the rollouts ended with
	// (progress in between is coalesced in time, so how many more depends
	// on the clock), and none failed.
	got := only(scrape(t, ns), "podset_operator_", "podset_rollout_")
	const statusWrites = `podset_operator_status_writes_total{outcome="success",podset="web"}`
	if n := got[statusWrites]; n < 2 {
		t.Errorf("%s = %v, want at least 2", statusWrites, n)
	}
	delete(got, statusWrites)
	want := map[string]float64{
		`podset_operator_pod_writes_total{kind="create",outcome="success",podset="web"}`:          2,
		`podset_operator_pod_writes_total{kind="gate",outcome="success",podset="web"}`:            6,
		`podset_operator_pod_writes_total{kind="update_in_place",outcome="success",podset="web"}`: 2,
		`podset_rollout_duration_seconds_count{podset="web"}`:                                     2,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("write and rollout metrics (-want +got):\n%s", diff)
	}

	// Deleted, the PodSet leaves no series behind.
	if err := env.Client.Delete(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no series of a deleted PodSet", func(context.Context) error {
		if left := scrape(t, ns); len(left) > 0 {
			return fmt.Errorf("series left: %v", left)
		}
		return nil
	})
}
