package gitops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// health is what each GitOps tool makes of one PodSet.
type health struct {
	// Argo is the result of config/gitops/argocd/health.lua.
	Argo argoHealth
	// Kstatus is kstatus's generic verdict: what Flux, kubectl-style
	// waiters and cli-utils compute when no custom check is configured.
	Kstatus kstatusHealth
	// Flux is the verdict of the healthCheckExprs in
	// config/gitops/flux/podset-operator.yaml.
	Flux status.Status
}

type argoHealth struct{ Status, Message string }

type kstatusHealth struct {
	Status  status.Status
	Message string
}

// Messages the operator writes (see controller.deadlineStall and
// computeStatus).
const (
	deadlineMessage = "no progress for 10m0s (spec.progressDeadlineSeconds), 0/2 pods available; web-0, web-1: Unschedulable: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
	pausedMessage   = "3/3 pods ready, 3/3 available, 0/3 up to date; 3 pods run an older template (spec.paused: updated once resumed)"
	heldMessage     = "4/4 pods ready, 4/4 available, 2/4 up to date; 2 pods run an older template (partition 2 holds back ordinals below it)"
)

// progressing is the health of a PodSet on its way in every tool: Argo CD
// saying argoMessage, kstatus kstatusMessage.
func progressing(argoMessage, kstatusMessage string) health {
	return health{
		Argo:    argoHealth{"Progressing", argoMessage},
		Kstatus: kstatusHealth{status.InProgressStatus, kstatusMessage},
		Flux:    status.InProgressStatus,
	}
}

// healthy is the health of a ready PodSet in every tool: Argo CD saying
// argoMessage, kstatus its generic "Resource is Ready".
func healthy(argoMessage string) health {
	return health{
		Argo:    argoHealth{"Healthy", argoMessage},
		Kstatus: kstatusHealth{status.CurrentStatus, "Resource is Ready"},
		Flux:    status.CurrentStatus,
	}
}

// degraded is the health of a stalled PodSet in every tool, Argo CD and
// kstatus both saying message.
func degraded(message string) health {
	return health{
		Argo:    argoHealth{"Degraded", message},
		Kstatus: kstatusHealth{status.FailedStatus, message},
		Flux:    status.FailedStatus,
	}
}

func TestHealthOfPodSets(t *testing.T) {
	ns := newNamespace(t)
	script := string(readConfig(t, "gitops", "argocd", "health.lua"))
	flux := podSetStatusEvaluator(t)

	stalled := &podsetv1alpha1.PodSetStatus{
		ObservedGeneration: 1,
		Replicas:           3,
		Conditions: []metav1.Condition{
			condition(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, "2 of 3 pods ready"),
			condition(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, podsetv1alpha1.PodConflictReason, "blocked by a pod it does not control"),
			condition(podsetv1alpha1.StalledCondition, metav1.ConditionTrue, podsetv1alpha1.PodConflictReason, "pod web-5-1 exists and is not controlled by this PodSet"),
		},
	}
	cases := []struct {
		name string
		// specChanged updates the spec once after creation: the PodSet is
		// then at generation 2.
		specChanged bool
		// status is what the operator wrote; nil: nothing yet.
		status *podsetv1alpha1.PodSetStatus
		want   health
	}{{
		name: "created, no status yet",
		// The schema defaults status.observedGeneration to 0, so before the
		// operator's first pass every tool sees a PodSet in progress.
		want: progressing(
			"Waiting for the operator to observe generation 1 (observed: 0)",
			"PodSet generation is 1, but latest observed generation is 0"),
	}, {
		name:        "spec changed, not observed yet",
		specChanged: true,
		status:      readyStatus(1),
		want: progressing(
			"Waiting for the operator to observe generation 2 (observed: 1)",
			"PodSet generation is 2, but latest observed generation is 1"),
	}, {
		name: "scaling up",
		status: &podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 1,
			Replicas:           1,
			Conditions: []metav1.Condition{
				condition(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, "0 of 3 pods ready"),
				condition(podsetv1alpha1.ReconcilingCondition, metav1.ConditionTrue, podsetv1alpha1.ScalingUpReason, "creating pods: 1 of 3 exist"),
				condition(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, podsetv1alpha1.ScalingUpReason, ""),
			},
		},
		want: progressing("creating pods: 1 of 3 exist", "creating pods: 1 of 3 exist"),
	}, {
		name: "waiting for pods to become ready",
		status: &podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 1,
			Replicas:           3,
			ReadyReplicas:      2,
			AvailableReplicas:  2,
			UpdatedReplicas:    3,
			Conditions: []metav1.Condition{
				condition(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, "2 of 3 pods ready"),
			},
		},
		want: progressing("2 of 3 pods ready", "2 of 3 pods ready"),
	}, {
		name:   "ready and up to date",
		status: readyStatus(1),
		want:   healthy("3 of 3 pods ready and up to date"),
	}, {
		name:   "stalled",
		status: stalled,
		want:   degraded("pod web-5-1 exists and is not controlled by this PodSet"),
	}, {
		// A template whose pods never run: Degraded with the operator's
		// message once spec.progressDeadlineSeconds passes without progress.
		name: "progress deadline exceeded",
		status: &podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 1,
			Replicas:           2,
			UpdateRevision:     "web-abc",
			CurrentRevision:    "web-abc",
			LastProgressTime:   ptr.To(metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))),
			Conditions: []metav1.Condition{
				condition(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.NotReadyReason, "0/2 pods ready, 0/2 available, 2/2 up to date"),
				condition(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, podsetv1alpha1.ProgressDeadlineExceededReason, deadlineMessage),
				condition(podsetv1alpha1.StalledCondition, metav1.ConditionTrue, podsetv1alpha1.ProgressDeadlineExceededReason, deadlineMessage),
			},
		},
		want: degraded(deadlineMessage),
	}, {
		// OnDelete and a partition hold pods on an older template on
		// purpose: healthy once every pod is available, as a StatefulSet.
		name: "OnDelete or partition, older pods available",
		status: &podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 1,
			Replicas:           4,
			ReadyReplicas:      4,
			AvailableReplicas:  4,
			UpdatedReplicas:    2,
			CurrentRevision:    "web-old",
			UpdateRevision:     "web-new",
			Conditions: []metav1.Condition{
				condition(podsetv1alpha1.ReadyCondition, metav1.ConditionTrue, podsetv1alpha1.ReadyReason, heldMessage),
				condition(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, podsetv1alpha1.ConvergedReason, heldMessage),
				condition(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, podsetv1alpha1.ConvergedReason, heldMessage),
			},
		},
		want: healthy(heldMessage),
	}, {
		// spec.paused holds a new template back, every pod available:
		// Suspended in Argo CD, as a paused Deployment; in progress for
		// kstatus and Flux, as a paused Deployment with a new template
		// (kstatus: "Updated: 0/3"), so a Kustomization with wait: true
		// fails its health check at its timeout until the PodSet is
		// resumed.
		name:        "paused with changes pending",
		specChanged: true,
		status: &podsetv1alpha1.PodSetStatus{
			ObservedGeneration: 2,
			Replicas:           3,
			ReadyReplicas:      3,
			AvailableReplicas:  3,
			CurrentRevision:    "web-old",
			UpdateRevision:     "web-new",
			Conditions: []metav1.Condition{
				condition(podsetv1alpha1.ReadyCondition, metav1.ConditionFalse, podsetv1alpha1.PausedReason, pausedMessage),
				condition(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, podsetv1alpha1.PausedReason, pausedMessage),
				condition(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, podsetv1alpha1.PausedReason, pausedMessage),
			},
		},
		want: health{
			Argo:    argoHealth{"Suspended", pausedMessage},
			Kstatus: kstatusHealth{status.InProgressStatus, pausedMessage},
			Flux:    status.InProgressStatus,
		},
	}, {
		// A fix for a stalled PodSet is Progressing as soon as it is pushed,
		// not Degraded until the operator catches up.
		name:        "stalled, then spec changed",
		specChanged: true,
		status:      stalled,
		want: progressing(
			"Waiting for the operator to observe generation 2 (observed: 1)",
			"PodSet generation is 2, but latest observed generation is 1"),
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := storePodSet(t, ns, fmt.Sprintf("web-%d", i), tc.specChanged, tc.status)

			var got health
			var err error
			if got.Argo, err = runArgoHealthCheck(t.Context(), script, obj); err != nil {
				t.Fatalf("health.lua: %v", err)
			}
			res, err := status.Compute(obj)
			if err != nil {
				t.Fatalf("kstatus: %v", err)
			}
			got.Kstatus = kstatusHealth{res.Status, res.Message}
			got.Flux, err = flux.status(t.Context(), obj)
			if err != nil {
				t.Logf("Flux health check: %v", err)
			}

			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("health (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArgoCDConfigMapEmbedsHealthLua keeps the copy of the script in the
// argocd-cm snippet identical to health.lua, which the test above runs.
func TestArgoCDConfigMapEmbedsHealthLua(t *testing.T) {
	script := readConfig(t, "gitops", "argocd", "health.lua")
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(readConfig(t, "gitops", "argocd", "argocd-cm-patch.yaml"), cm); err != nil {
		t.Fatal(err)
	}
	const key = "resource.customizations.health.podset.dev_PodSet"
	embedded, ok := cm.Data[key]
	if !ok {
		t.Fatalf("argocd-cm-patch.yaml has no data key %s", key)
	}
	if diff := cmp.Diff(string(script), embedded); diff != "" {
		t.Errorf("argocd-cm-patch.yaml and health.lua differ (-health.lua +argocd-cm-patch.yaml):\n%s", diff)
	}
}

// TestGitOpsManifestsDecode catches YAML mistakes in the examples, which no
// other test applies.
func TestGitOpsManifestsDecode(t *testing.T) {
	for _, file := range []string{
		filepath.Join("argocd", "application.yaml"),
		filepath.Join("argocd", "argocd-cm-patch.yaml"),
		filepath.Join("flux", "podset-operator.yaml"),
	} {
		t.Run(file, func(t *testing.T) {
			objs := readConfigManifests(t, "gitops", file)
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			for _, obj := range objs {
				if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
					t.Errorf("object without apiVersion, kind or name: %v", obj.Object)
				}
			}
		})
	}
}

// storePodSet creates a PodSet, changes its spec once if specChanged, writes
// st to its status subresource unless st is nil, and returns it as read back
// from the API server.
func storePodSet(t *testing.T, ns, name string, specChanged bool, st *podsetv1alpha1.PodSetStatus) *unstructured.Unstructured {
	t.Helper()
	ps := &podsetv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: podsetv1alpha1.PodSetSpec{
			Replicas: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}},
			}},
		},
	}
	if err := env.Client.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	if specChanged {
		ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		if err := env.Client.Update(t.Context(), ps); err != nil {
			t.Fatal(err)
		}
	}
	if st != nil {
		ps.Status = *st
		if err := env.Client.Status().Update(t.Context(), ps); err != nil {
			t.Fatal(err)
		}
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(podsetv1alpha1.GroupVersion.WithKind("PodSet"))
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func readyStatus(observedGeneration int64) *podsetv1alpha1.PodSetStatus {
	return &podsetv1alpha1.PodSetStatus{
		ObservedGeneration: observedGeneration,
		Replicas:           3,
		ReadyReplicas:      3,
		AvailableReplicas:  3,
		UpdatedReplicas:    3,
		Conditions: []metav1.Condition{
			condition(podsetv1alpha1.ReadyCondition, metav1.ConditionTrue, podsetv1alpha1.ReadyReason, "3 of 3 pods ready and up to date"),
			condition(podsetv1alpha1.ReconcilingCondition, metav1.ConditionFalse, podsetv1alpha1.ConvergedReason, ""),
			condition(podsetv1alpha1.StalledCondition, metav1.ConditionFalse, podsetv1alpha1.ConvergedReason, ""),
		},
	}
}

func condition(conditionType string, st metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{
		Type:               conditionType,
		Status:             st,
		Reason:             reason,
		Message:            message,
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gitops-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.WithoutCancel(t.Context()), ns) })
	return ns.Name
}

// repoPath is the path of a file in the repository.
func repoPath(t *testing.T, path ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, path...)...)
}

// configPath is the path of a file under config/.
func configPath(t *testing.T, path ...string) string {
	t.Helper()
	return repoPath(t, append([]string{"config"}, path...)...)
}

// readConfig reads a file under config/.
func readConfig(t *testing.T, path ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(configPath(t, path...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// readConfigManifests decodes every object of a YAML file under config/.
func readConfigManifests(t *testing.T, path ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.ReadManifests(configPath(t, path...))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// runArgoHealthCheck runs a health script the way Argo CD runs a custom one
// from argocd-cm (util/lua in argoproj/argo-cd): gopher-lua with only the
// package, base and table libraries (Argo CD adds a reduced os library,
// which the script does not use), a one-second budget, the object as the
// global table obj, and the table the script returns as the verdict.
func runArgoHealthCheck(ctx context.Context, script string, obj *unstructured.Unstructured) (argoHealth, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	if err := openLuaLibs(l, argoLuaLibs); err != nil {
		return argoHealth{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return argoHealth{}, err
	}
	result, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return argoHealth{}, fmt.Errorf("the script returned %s, want a table", l.Get(-1).Type())
	}
	h := argoHealth{Status: luaString(result.RawGetString("status")), Message: luaString(result.RawGetString("message"))}
	if !slices.Contains([]string{"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}, h.Status) {
		return argoHealth{}, fmt.Errorf("the script returned status %q, which Argo CD does not know", h.Status)
	}
	return h, nil
}

// luaLib is a standard Lua library: its name and its opener.
type luaLib struct {
	name string
	open lua.LGFunction
}

// argoLuaLibs are the libraries Argo CD opens for every script: package,
// base and table.
var argoLuaLibs = []luaLib{
	{lua.LoadLibName, lua.OpenPackage},
	{lua.BaseLibName, lua.OpenBase},
	{lua.TabLibName, lua.OpenTable},
}

// openLuaLibs opens libs in l, in order.
func openLuaLibs(l *lua.LState, libs []luaLib) error {
	for _, lib := range libs {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return err
		}
	}
	return nil
}

// luaValue converts decoded JSON to Lua values as Argo CD does (decodeValue
// in util/lua): objects and arrays become tables, numbers float64.
func luaValue(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(luaValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), luaValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}

func luaString(v lua.LValue) string {
	if s, ok := v.(lua.LString); ok {
		return string(s)
	}
	return ""
}

// fluxHealthCheck is one entry of a Flux Kustomization's
// spec.healthCheckExprs.
type fluxHealthCheck struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	InProgress string `json:"inProgress"`
	Failed     string `json:"failed"`
	Current    string `json:"current"`
}

// fluxStatusEvaluator computes a status from a health check the way
// kustomize-controller does (StatusEvaluator in fluxcd/pkg/runtime/cel,
// mirrored here because that module needs a newer Go than this one).
type fluxStatusEvaluator struct {
	inProgress, failed, current cel.Program
}

// podSetStatusEvaluator parses the PodSet health check of the Flux example.
func podSetStatusEvaluator(t *testing.T) *fluxStatusEvaluator {
	t.Helper()
	for _, obj := range readConfigManifests(t, "gitops", "flux", "podset-operator.yaml") {
		if obj.GetKind() != "Kustomization" {
			continue
		}
		exprs, _, err := unstructured.NestedSlice(obj.Object, "spec", "healthCheckExprs")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range exprs {
			var hc fluxHealthCheck
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(e.(map[string]any), &hc); err != nil {
				t.Fatal(err)
			}
			if hc.APIVersion != podsetv1alpha1.GroupVersion.String() || hc.Kind != "PodSet" {
				continue
			}
			if hc.Current == "" {
				t.Fatal("the PodSet health check has no current expression, which Flux requires")
			}
			return &fluxStatusEvaluator{
				inProgress: parseFluxExpr(t, hc.InProgress),
				failed:     parseFluxExpr(t, hc.Failed),
				current:    parseFluxExpr(t, hc.Current),
			}
		}
	}
	t.Fatal("config/gitops/flux/podset-operator.yaml has no healthCheckExprs for podset.dev/v1alpha1 PodSet")
	return nil
}

// parseFluxExpr prepares a CEL expression in the environment Flux uses for
// health checks (NewExpression in fluxcd/pkg/runtime/cel, without
// compilation: parsed only, with the object's top-level fields as
// variables). An empty expression yields nil.
func parseFluxExpr(t *testing.T, expr string) cel.Program {
	t.Helper()
	if expr == "" {
		return nil
	}
	celEnv, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
	if err != nil {
		t.Fatal(err)
	}
	ast, issues := celEnv.Parse(expr)
	if issues != nil && issues.Err() != nil {
		t.Fatalf("parsing %q: %v", expr, issues.Err())
	}
	prog, err := celEnv.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
	if err != nil {
		t.Fatalf("parsing %q: %v", expr, err)
	}
	return prog
}

// status is InProgress while status.observedGeneration is set and differs
// from metadata.generation; otherwise the status of the first of
// inProgress, failed and current that is true, and InProgress when none is.
// An expression that cannot be evaluated makes Flux's status reader report
// Unknown (and wait until the Kustomization's timeout).
func (e *fluxStatusEvaluator) status(ctx context.Context, obj *unstructured.Unstructured) (status.Status, error) {
	observed, found, err := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if err == nil && found && observed != obj.GetGeneration() {
		return status.InProgressStatus, nil
	}
	for _, check := range []struct {
		prog   cel.Program
		status status.Status
	}{
		{e.inProgress, status.InProgressStatus},
		{e.failed, status.FailedStatus},
		{e.current, status.CurrentStatus},
	} {
		if check.prog == nil {
			continue
		}
		val, _, err := check.prog.ContextEval(ctx, obj.Object)
		if err != nil {
			return status.UnknownStatus, err
		}
		b, ok := val.(celtypes.Bool)
		if !ok {
			return status.UnknownStatus, fmt.Errorf("an expression returned %s, not a boolean", val.Type())
		}
		if b {
			return check.status, nil
		}
	}
	return status.InProgressStatus, nil
}
