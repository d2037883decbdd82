package testenv

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// How the suites read the operator's own metrics: the benchmark's scrapes
// and the end-to-end suite's are parsed here, the registry of an operator
// run in process (test/integration, the benchmark's in-process
// measurements) is gathered here, and all of them take a series' value
// from here, so that they read a sample the same way.

// Metrics is one scrape of a Prometheus endpoint: its families by name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics reads a scrape in the text exposition format, which the
// operator's metrics endpoint serves to a client that asks for nothing
// else.
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// GatherMetrics is what g, the registry of an operator run in the test's
// process, would serve on its metrics endpoint.
func GatherMetrics(g prometheus.Gatherer) (Metrics, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, err
	}
	m := Metrics{}
	for _, f := range families {
		m[f.GetName()] = f
	}
	return m, nil
}

// Sample is the value of the first series of the family name whose
// labels include labels, and whether there is one. A label a series does
// not have matches the empty value, as in a Prometheus selector.
func (m Metrics) Sample(name string, labels map[string]string) (float64, bool) {
	for _, s := range m[name].GetMetric() {
		matches := true
		for k, v := range labels {
			matches = matches && labelValue(s, k) == v
		}
		if matches {
			return Value(m[name], s), true
		}
	}
	return 0, false
}

// SumBy sums the series of the family name by their value of label
// (empty for a series without it), as PromQL's sum by (label) does.
func (m Metrics) SumBy(name, label string) map[string]float64 {
	sums := map[string]float64{}
	for _, s := range m[name].GetMetric() {
		sums[labelValue(s, label)] += Value(m[name], s)
	}
	return sums
}

// Value is the value of the series s of family f: a gauge's or a
// counter's value, a histogram's count of observations (its _count
// series), zero for the other types.
func Value(f *dto.MetricFamily, s *dto.Metric) float64 {
	switch f.GetType() {
	case dto.MetricType_GAUGE:
		return s.GetGauge().GetValue()
	case dto.MetricType_COUNTER:
		return s.GetCounter().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(s.GetHistogram().GetSampleCount())
	}
	return 0
}

func labelValue(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
