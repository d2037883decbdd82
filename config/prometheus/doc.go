// Package prometheus holds no code: its tests prove that the alerts
// (rules.yaml) parse with Prometheus's own rule parser and that every
// metric the alerts and the Grafana dashboard (dashboard.json) query is one
// the operator serves after it has reconciled a PodSet.
package prometheus
