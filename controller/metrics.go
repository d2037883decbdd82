package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The per-PodSet metrics, on the operator's metrics endpoint next to
// controller-runtime's own. They are named and labelled the way
// kube-state-metrics names the gauges of the built-in workloads
// (kube_statefulset_status_replicas_ready{namespace,statefulset}), so the
// dashboards and alerts a team has for those read the same way here.
// docs/runbooks.md and config/prometheus use these names.
const (
	metricSpecReplicas      = "podset_spec_replicas"
	metricReplicas          = "podset_status_replicas"
	metricReadyReplicas     = "podset_status_replicas_ready"
	metricAvailableReplicas = "podset_status_replicas_available"
	metricUpdatedReplicas   = "podset_status_replicas_updated"
	metricCondition         = "podset_status_condition"
	metricCurrentRevision   = "podset_status_current_revision"
	metricUpdateRevision    = "podset_status_update_revision"
	metricLastProgressTime  = "podset_status_last_progress_time_seconds"
	metricPodWrites         = "podset_operator_pod_writes_total"
	metricStatusWrites      = "podset_operator_status_writes_total"
	metricRolloutDuration   = "podset_rollout_duration_seconds"
	metricLostNodeReplaced  = "podset_operator_lost_node_replacements_total"
)

// The kinds of pod writes podset_operator_pod_writes_total counts.
const (
	// writeCreate is the apply that creates a pod.
	writeCreate = "create"
	// writeUpdateInPlace is an in-place update: the resize and the apply
	// of a pod's metadata and images.
	writeUpdateInPlace = "update_in_place"
	// writeGate is a write of the readiness gate condition (pods/status).
	writeGate = "gate"
	// writeDelete is the deletion of a pod.
	writeDelete = "delete"
	// writeRepair is the apply that restores what the operator owns on an
	// existing pod.
	writeRepair = "repair"
)

// conditionTypes are the conditions podset_status_condition reports, each
// with all three statuses, as kube-state-metrics does.
var conditionTypes = [...]string{podsetv1alpha1.ReadyCondition, podsetv1alpha1.ReconcilingCondition, podsetv1alpha1.StalledCondition}

// metrics are the operator's metrics of one manager: the write counters,
// the rollout histogram and the status gauges of the PodSets its memory
// holds. One Collector, made by SetupWithManager, registered while the
// manager runs (registered) and unregistered when it stops, so nothing
// outlives its manager: a process that ran another operator before (a
// test suite) reports only the live one's.
type metrics struct {
	podWrites            *prometheus.CounterVec
	statusWrites         *prometheus.CounterVec
	rolloutDuration      *prometheus.HistogramVec
	lostNodeReplacements *prometheus.CounterVec
	status               *statusCollector
}

var _ prometheus.Collector = (*metrics)(nil)

// newMetrics makes the metrics of an operator whose memory is m.
func newMetrics(m *memory) *metrics {
	return &metrics{
		podWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPodWrites,
			Help: "Pod writes the operator sent, by PodSet, kind (create, update_in_place, gate, delete, repair) and outcome (success, error). " +
				"A write that lost a race the operator expects (the pod changed or went away since the cache showed it) counts as a success.",
		}, []string{"namespace", "podset", "kind", "outcome"}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricStatusWrites,
			Help: "Status writes (applies to the status subresource) the operator sent, by PodSet and outcome (success, error). " +
				"A PodSet the operator cannot write the status of shows clients a status that no longer moves.",
		}, []string{"namespace", "podset", "outcome"}),
		rolloutDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: metricRolloutDuration,
			Help: "Seconds from the operator first seeing a PodSet's new spec (a new generation) to the PodSet reporting Ready=True for it. " +
				"A rollout in flight when the operator restarts is not counted.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"namespace", "podset"}),
		lostNodeReplacements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricLostNodeReplaced,
			Help: "Pods the operator force-deleted to create them again elsewhere because their node was lost (spec.lostNodeReplacement), by PodSet. " +
				"Each may run twice while its node is cut off but alive.",
		}, []string{"namespace", "podset"}),
		status: newStatusCollector(m),
	}
}

// collectors are the metrics' parts.
func (x *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{x.podWrites, x.statusWrites, x.rolloutDuration, x.lostNodeReplacements, x.status}
}

// Describe sends the descriptors of every metric.
func (x *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range x.collectors() {
		c.Describe(ch)
	}
}

// Collect sends every metric.
func (x *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range x.collectors() {
		c.Collect(ch)
	}
}

// registered is a runnable of the manager that registers the metrics with
// reg while the operator runs, as the leader where leader election is on,
// and unregisters them once it stops.
func (x *metrics) registered(reg prometheus.Registerer) manager.RunnableFunc {
	return func(ctx context.Context) error {
		if err := reg.Register(x); err != nil {
			return fmt.Errorf("registering the PodSet metrics: %w", err)
		}
		<-ctx.Done()
		reg.Unregister(x)
		return nil
	}
}

// countPodWrite counts one pod write of a kind and its outcome.
func (x *metrics) countPodWrite(ps *podsetv1alpha1.PodSet, kind string, err error) {
	x.podWrites.WithLabelValues(ps.Namespace, ps.Name, kind, writeOutcome(err)).Inc()
}

// countStatusWrite counts one status write and its outcome; NotFound (the
// PodSet went away) is no error.
func (x *metrics) countStatusWrite(ps *podsetv1alpha1.PodSet, err error) {
	x.statusWrites.WithLabelValues(ps.Namespace, ps.Name, writeOutcome(err)).Inc()
}

// writeOutcome is the outcome label of a write: NotFound and Conflict are
// the races with the cache the operator expects and handles (the next pass
// sees the object as it is), so they are not errors.
func writeOutcome(err error) string {
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "error"
	}
	return "success"
}

// rolloutEnded stores the status shown for a PodSet. It starts timing a
// rollout when the PodSet's generation is one its status has not observed
// yet, and reports its start once the status shows that generation Ready.
func (m *memory) rolloutEnded(ps *podsetv1alpha1.PodSet, shown podsetv1alpha1.PodSetStatus) (started time.Time, done bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recordOf(keyOf(ps))
	r.shown = &shownStatus{specReplicas: ptr.Deref(ps.Spec.Replicas, 1), status: shown}
	if ps.Generation != ps.Status.ObservedGeneration && (r.rollout == nil || r.rollout.generation != ps.Generation) {
		r.rollout = &rollout{generation: ps.Generation, since: m.clock.Now()}
	}
	if r.rollout != nil && shown.ObservedGeneration >= r.rollout.generation && meta.IsStatusConditionTrue(shown.Conditions, podsetv1alpha1.ReadyCondition) {
		started = r.rollout.since
		r.rollout = nil
		return started, true
	}
	return time.Time{}, false
}

// forget removes the counter series of a PodSet that is gone; its gauges
// went with its record.
func (x *metrics) forget(key types.NamespacedName) {
	labels := prometheus.Labels{"namespace": key.Namespace, "podset": key.Name}
	x.podWrites.DeletePartialMatch(labels)
	x.statusWrites.DeletePartialMatch(labels)
	x.rolloutDuration.DeletePartialMatch(labels)
	x.lostNodeReplacements.DeletePartialMatch(labels)
}

// statusCollector reports the status gauges of every PodSet from the last
// status each pass showed, as the operator's memory holds it. A collector,
// rather than gauge vectors, because the revision and condition series
// change labels as the status moves: a scrape sees one consistent status per
// PodSet, never a half-updated one.
type statusCollector struct {
	memory *memory

	specReplicas, replicas, ready, available, updated *prometheus.Desc
	condition, currentRevision, updateRevision        *prometheus.Desc
	lastProgress                                      *prometheus.Desc
}

// shownStatus is what the gauges of one PodSet report. It is not changed
// once stored (a pass stores a new one), so a scrape reads it without
// holding the memory.
type shownStatus struct {
	specReplicas int32
	status       podsetv1alpha1.PodSetStatus
}

// podSetGauges are the status gauges of one PodSet, by family (the
// gauge* indexes).
type podSetGauges [gaugeFamilies][]prometheus.Metric

// The families of podSetGauges, in the order their label values sort: a
// condition's series by condition type first (conditionTypes is sorted),
// then by namespace and PodSet (the scrape's order), then status.
const (
	gaugeSpecReplicas = iota
	gaugeReplicas
	gaugeReady
	gaugeAvailable
	gaugeUpdated
	// gaugeConditions is the first of one family per condition type.
	gaugeConditions
	gaugeCurrentRevision = gaugeConditions + len(conditionTypes)
	gaugeUpdateRevision  = gaugeCurrentRevision + 1
	gaugeLastProgress    = gaugeUpdateRevision + 1
	gaugeFamilies        = gaugeLastProgress + 1
)

// conditionStatuses are the statuses of each condition, in the order of
// their labels (false, true, unknown).
var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionUnknown}

// rollout is a spec generation the operator is rolling out, and since when.
type rollout struct {
	generation int64
	since      time.Time
}

var _ prometheus.Collector = (*statusCollector)(nil)

// newStatusCollector reports the status gauges of the PodSets m holds.
func newStatusCollector(m *memory) *statusCollector {
	keys := []string{"namespace", "podset"}
	desc := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(keys, extra...), nil)
	}
	return &statusCollector{
		memory:          m,
		specReplicas:    desc(metricSpecReplicas, "Number of desired pods of a PodSet (spec.replicas)."),
		replicas:        desc(metricReplicas, "Number of pods the PodSet controls (status.replicas)."),
		ready:           desc(metricReadyReplicas, "Number of the PodSet's pods that are Ready (status.readyReplicas)."),
		available:       desc(metricAvailableReplicas, "Number of the PodSet's pods Ready for minReadySeconds (status.availableReplicas)."),
		updated:         desc(metricUpdatedReplicas, "Number of the PodSet's pods on the update revision (status.updatedReplicas)."),
		condition:       desc(metricCondition, "The PodSet's conditions: 1 for the current status of each of Ready, Reconciling and Stalled, with its reason.", "condition", "status", "reason"),
		currentRevision: desc(metricCurrentRevision, "The revision the oldest desired pods of the PodSet run (status.currentRevision), value 1.", "revision"),
		updateRevision:  desc(metricUpdateRevision, "The revision of the PodSet's current template (status.updateRevision), value 1.", "revision"),
		lastProgress:    desc(metricLastProgressTime, "Unix time the PodSet last made progress (status.lastProgressTime)."),
	}
}

// Describe sends the descriptors of the status gauges.
func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.specReplicas, c.replicas, c.ready, c.available, c.updated, c.condition, c.currentRevision, c.updateRevision, c.lastProgress} {
		ch <- d
	}
}

// Collect sends the status gauges of every PodSet the operator knows, each
// family's in the order the registry sorts them into (by namespace and
// PodSet), which it then sorts in linear time; out of order, that sort
// was a third of a scrape with 1000 PodSets. The operator's memory is held
// only to read which status each PodSet shows: not while the gauges are
// built or sent, so a scrape does not hold up the passes. The gauges are
// built anew by each scrape: kept, they would hold 10 KB per PodSet.
func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	type shown struct {
		key types.NamespacedName
		s   *shownStatus
	}
	m := c.memory
	m.mu.Lock()
	sets := make([]shown, 0, len(m.records))
	for key, r := range m.records {
		if r.shown != nil {
			sets = append(sets, shown{key, r.shown})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(sets, func(a, b shown) int {
		return cmp.Or(strings.Compare(a.key.Namespace, b.key.Namespace), strings.Compare(a.key.Name, b.key.Name))
	})
	gauges := make([]podSetGauges, len(sets))
	for i, set := range sets {
		gauges[i] = c.build(set.key, set.s)
	}
	for f := range gaugeFamilies {
		for i := range gauges {
			for _, g := range gauges[i][f] {
				ch <- g
			}
		}
	}
}

// build makes the status gauges of one PodSet.
func (c *statusCollector) build(key types.NamespacedName, s *shownStatus) podSetGauges {
	var g podSetGauges
	gauge := func(f int, d *prometheus.Desc, v float64, extra ...string) {
		g[f] = append(g[f], prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{key.Namespace, key.Name}, extra...)...))
	}
	gauge(gaugeSpecReplicas, c.specReplicas, float64(s.specReplicas))
	gauge(gaugeReplicas, c.replicas, float64(s.status.Replicas))
	gauge(gaugeReady, c.ready, float64(s.status.ReadyReplicas))
	gauge(gaugeAvailable, c.available, float64(s.status.AvailableReplicas))
	gauge(gaugeUpdated, c.updated, float64(s.status.UpdatedReplicas))
	for i, typ := range conditionTypes {
		status, reason := metav1.ConditionUnknown, ""
		if cond := meta.FindStatusCondition(s.status.Conditions, typ); cond != nil {
			status, reason = cond.Status, cond.Reason
		}
		for _, st := range conditionStatuses {
			gauge(gaugeConditions+i, c.condition, boolValue(st == status), typ, conditionLabel(st), reason)
		}
	}
	if s.status.CurrentRevision != "" {
		gauge(gaugeCurrentRevision, c.currentRevision, 1, s.status.CurrentRevision)
	}
	if s.status.UpdateRevision != "" {
		gauge(gaugeUpdateRevision, c.updateRevision, 1, s.status.UpdateRevision)
	}
	if t := s.status.LastProgressTime; t != nil {
		gauge(gaugeLastProgress, c.lastProgress, float64(t.Unix()))
	}
	return g
}

// conditionLabel is a condition status as kube-state-metrics writes it.
func conditionLabel(s metav1.ConditionStatus) string {
	switch s {
	case metav1.ConditionTrue:
		return "true"
	case metav1.ConditionFalse:
		return "false"
	default:
		return "unknown"
	}
}

// boolValue is 1 for true, 0 for false.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
