package prometheus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// readFile reads a file, named from this folder.
func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ruleGroups reads the groups of the PrometheusRule in rules.yaml as a
// Prometheus rule file, as the Prometheus Operator hands them to
// Prometheus, and parses them with Prometheus's own parser.
func ruleGroups(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	b := readFile(t, "rules.yaml")
	var rule struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &rule); err != nil {
		t.Fatal(err)
	}
	if rule.Kind != "PrometheusRule" {
		t.Fatalf("rules.yaml holds a %q, want a PrometheusRule", rule.Kind)
	}
	file, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(file, false, model.UTF8Validation)
	for _, err := range errs {
		t.Errorf("rules.yaml: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	return groups
}

// alerts are the alerts a team pages on, each with its runbook section.
var alerts = []string{"PodSetStalled", "PodSetProgressDeadlineExceeded", "PodSetNotReady", "PodSetOperatorDown", "PodSetOperatorPodWriteErrors", "PodSetOperatorStatusWriteErrors"}

func TestRulesParseAndLinkTheirRunbook(t *testing.T) {
	runbooks := readFile(t, "../../docs/runbooks.md")
	var got []string
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			got = append(got, r.Alert)
			if _, err := parser.ParseExpr(r.Expr); err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", r.Alert)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s has no %s annotation", r.Alert, a)
				}
			}
			const base = "https://github.com/podset-dev/podset-operator/blob/main/docs/runbooks.md#"
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], base)
			if !ok || anchor != strings.ToLower(r.Alert) || !strings.Contains(string(runbooks), "\n## "+r.Alert+"\n") {
				t.Errorf("alert %s: runbook_url %q, want %s%s and a section \"## %s\" in docs/runbooks.md",
					r.Alert, r.Annotations["runbook_url"], base, strings.ToLower(r.Alert), r.Alert)
			}
		}
	}
	if !slices.Equal(got, alerts) {
		t.Errorf("alerts %v, want %v", got, alerts)
	}
}

// grafanaVariables are the dashboard's variables and Grafana's own, with a
// value each, so that its queries parse as PromQL.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$namespace", "demo", "$podset", "web", "$job", "podset-operator-metrics")

// labelValues is Grafana's label_values(selector, label) query of a
// template variable.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)

// dashboardQueries returns every PromQL query of the dashboard: its
// panels' and its template variables'.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b := readFile(t, "dashboard.json")
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []panel `json:"panels"`
	}
	var dashboard struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dashboard); err != nil {
		t.Fatal(err)
	}
	var queries []string
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				queries = append(queries, target.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dashboard.Panels)
	for _, v := range dashboard.Templating.List {
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
			if m == nil {
				t.Errorf("variable query %v is not label_values(selector, label)", q["query"])
				continue
			}
			queries = append(queries, m[1])
		}
	}
	if len(queries) == 0 {
		t.Fatal("the dashboard queries nothing")
	}
	return queries
}

// prometheusSeries are the series Prometheus makes itself for every target.
var prometheusSeries = []string{"up"}

// closedLabels are the labels whose every value a scrape of one Ready
// PodSet shows (each condition with all three statuses, and the podset
// controller's own series): a matcher naming a value not among them can
// never match. Other labels (reason, kind, outcome) have values that a
// healthy PodSet does not show.
var closedLabels = []string{"condition", "status", "controller"}

func TestEveryMetricQueriedIsScraped(t *testing.T) {
	served := scrapeAfterAReconcile(t)
	var queries []string
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			queries = append(queries, r.Expr)
		}
	}
	for _, q := range dashboardQueries(t) {
		queries = append(queries, grafanaVariables.Replace(q))
	}
	for _, q := range queries {
		expr, err := parser.ParseExpr(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			if vs, ok := node.(*parser.VectorSelector); ok && !slices.Contains(prometheusSeries, vs.Name) {
				checkSelector(t, q, vs, served)
			}
			return nil
		})
	}
}

// checkSelector checks a series selector of query q against what the
// operator served: the series, each label it matches, and, for a label of
// closedLabels, the value it matches.
func checkSelector(t *testing.T, q string, vs *parser.VectorSelector, served map[string]map[string]map[string]bool) {
	t.Helper()
	have, ok := served[vs.Name]
	if !ok {
		t.Errorf("%s queries %s, which the operator does not serve", q, vs.Name)
		return
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel || m.Name == "job" {
			continue
		}
		values, ok := have[m.Name]
		if !ok {
			t.Errorf("%s matches label %s of %s, which has none (it has %v)", q, m.Name, vs.Name, slices.Sorted(maps.Keys(have)))
			continue
		}
		if m.Type == labels.MatchEqual && slices.Contains(closedLabels, m.Name) && !values[m.Value] {
			t.Errorf("%s matches %s=%q of %s, a value it never has (it has %v)", q, m.Name, m.Value, vs.Name, slices.Sorted(maps.Keys(values)))
		}
	}
}

// scrapeAfterAReconcile runs the operator on one PodSet until it is Ready,
// scrapes its metrics endpoint over HTTP as Prometheus does, and returns,
// for every series name it served (a histogram's as Prometheus stores
// them), each label's values.
func scrapeAfterAReconcile(t *testing.T) map[string]map[string]map[string]bool {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	addr := testenv.FreeAddress(t)
	endpoint := "http://" + addr + "/metrics"
	mgr, err := controller.NewManager(ctx, env.Config, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: addr},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}, controller.Options{MaxConcurrentReconciles: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	ps := fixture.PodSet(ns, "web").Create(t, env.Client)
	// Play the kubelet until the PodSet is Ready, then scrape until the
	// pass that wrote Ready has also recorded the rollout's duration.
	var served map[string]map[string]map[string]bool
	wait := testenv.Waiter{Timeout: time.Minute, Interval: 50 * time.Millisecond}
	wait.Eventually(t, "PodSet Ready and its rollout recorded", func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if status, _ := testenv.KubeletStatus(pod, false); pod.Status.Phase != corev1.PodRunning || !testenv.PodReady(pod) {
				pod.Status = status
				_ = env.Client.Status().Update(ctx, pod)
			}
		}
		got := &podsetv1alpha1.PodSet{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ps), got); err != nil {
			return err
		}
		if c := testenv.Condition(got, podsetv1alpha1.ReadyCondition); c.Status != metav1.ConditionTrue || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("PodSet not Ready: %+v", got.Status)
		}
		if served = scrape(t, endpoint); served["podset_rollout_duration_seconds_count"] == nil {
			return fmt.Errorf("PodSet Ready, but its rollout not recorded")
		}
		return nil
	})
	return served
}

// scrape reads the metrics endpoint's text exposition: for every series
// name, each label's values.
func scrape(t *testing.T, endpoint string) map[string]map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", endpoint, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape of %s: %v", endpoint, err)
	}
	served := map[string]map[string]map[string]bool{}
	add := func(name string, pairs []*dto.LabelPair) {
		labels := served[name]
		if labels == nil {
			labels = map[string]map[string]bool{}
			served[name] = labels
		}
		for _, p := range pairs {
			if labels[p.GetName()] == nil {
				labels[p.GetName()] = map[string]bool{}
			}
			labels[p.GetName()][p.GetValue()] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetType() == dto.MetricType_HISTOGRAM {
				add(name+"_bucket", append(slices.Clone(m.GetLabel()), &dto.LabelPair{Name: ptr.To("le"), Value: ptr.To("+Inf")}))
				add(name+"_sum", m.GetLabel())
				add(name+"_count", m.GetLabel())
				continue
			}
			add(name, m.GetLabel())
		}
	}
	return served
}
