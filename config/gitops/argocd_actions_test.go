package gitops_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// restartedAt is the annotation the restart action sets on the template.
const restartedAt = "kubectl.kubernetes.io/restartedAt"

// actionTests is an action_test.yaml of Argo CD's resource_customizations.
type actionTests struct {
	DiscoveryTests []struct {
		InputPath string       `json:"inputPath"`
		Result    []argoAction `json:"result"`
	} `json:"discoveryTests"`
	ActionTests []struct {
		Action             string `json:"action"`
		InputPath          string `json:"inputPath"`
		ExpectedOutputPath string `json:"expectedOutputPath"`
	} `json:"actionTests"`
}

// argoAction is an action discovery.lua offers (ResourceAction in Argo CD).
type argoAction struct {
	Name     string `json:"name"`
	Disabled bool   `json:"disabled,omitempty"`
}

// TestArgoCDResourceActions runs every case of every action_test.yaml under
// argocd/resource_customizations the way Argo CD tests its built-in actions
// (TestLuaResourceActionsScript in argoproj/argo-cd util/lua): discovery.lua
// must offer the listed actions, and each action.lua must turn the input
// into the expected output, once the time a restart writes is normalized.
func TestArgoCDResourceActions(t *testing.T) {
	forEachCustomization(t, "action_test.yaml", func(path, dir string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var tests actionTests
		if err := yaml.UnmarshalStrict(data, &tests); err != nil {
			return err
		}
		if len(tests.DiscoveryTests) == 0 || len(tests.ActionTests) == 0 {
			t.Errorf("%s has no discovery or no action tests", path)
		}
		for _, tc := range tests.DiscoveryTests {
			t.Run("discovery/"+tc.InputPath, func(t *testing.T) {
				got, err := runArgoActionDiscovery(t.Context(), string(readFile(t, dir, "discovery.lua")), readObject(t, dir, tc.InputPath))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.Result, got); diff != "" {
					t.Errorf("actions (-action_test.yaml +discovery.lua):\n%s", diff)
				}
			})
		}
		for _, tc := range tests.ActionTests {
			t.Run(tc.Action+"/"+tc.InputPath, func(t *testing.T) {
				script := string(readFile(t, dir, tc.Action, "action.lua"))
				before := time.Now().UTC().Truncate(time.Second)
				got, err := runArgoAction(t.Context(), script, readObject(t, dir, tc.InputPath))
				if err != nil {
					t.Fatal(err)
				}
				normalizeRestartedAt(t, got, before, time.Now().UTC())
				want := readObject(t, dir, tc.ExpectedOutputPath)
				if diff := cmp.Diff(want.Object, got.Object); diff != "" {
					t.Errorf("output (-%s +%s):\n%s", tc.ExpectedOutputPath, tc.Action+"/action.lua", diff)
				}
			})
		}
		return nil
	})
}

// normalizeRestartedAt checks that the template's restartedAt, if set, is
// a UTC RFC 3339 time between from and to, and sets it to the zero time,
// as Argo CD's test normalizes it.
func normalizeRestartedAt(t *testing.T, obj *unstructured.Unstructured, from, to time.Time) {
	t.Helper()
	at, ok, _ := unstructured.NestedString(obj.Object, "spec", "template", "metadata", "annotations", restartedAt)
	if !ok {
		return
	}
	when, err := time.Parse("2006-01-02T15:04:05Z", at)
	if err != nil || when.Before(from) || when.After(to) {
		t.Errorf("%s %q, want the time the action ran in UTC, between %s and %s (%v)", restartedAt, at, from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	if err := unstructured.SetNestedField(obj.Object, "0001-01-01T00:00:00Z", "spec", "template", "metadata", "annotations", restartedAt); err != nil {
		t.Fatal(err)
	}
}

// TestArgoCDConfigMapEmbedsActions keeps the copies of the action scripts in
// the argocd-cm snippet identical to the files of Argo CD's layout, which
// the test above runs.
func TestArgoCDConfigMapEmbedsActions(t *testing.T) {
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(readConfig(t, "gitops", "argocd", "argocd-cm-patch.yaml"), cm); err != nil {
		t.Fatal(err)
	}
	const key = "resource.customizations.actions.podset.dev_PodSet"
	var actions struct {
		Discovery   string `json:"discovery.lua"`
		Definitions []struct {
			Name   string `json:"name"`
			Action string `json:"action.lua"`
		} `json:"definitions"`
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data[key]), &actions); err != nil {
		t.Fatalf("argocd-cm-patch.yaml %s: %v", key, err)
	}
	dir := filepath.Join(customizationsRoot(t), "podset.dev", "PodSet", "actions")
	if diff := cmp.Diff(string(readFile(t, dir, "discovery.lua")), actions.Discovery); diff != "" {
		t.Errorf("argocd-cm-patch.yaml discovery.lua differs (-resource_customizations +argocd-cm-patch.yaml):\n%s", diff)
	}
	var names []string
	for _, d := range actions.Definitions {
		names = append(names, d.Name)
		if diff := cmp.Diff(string(readFile(t, dir, d.Name, "action.lua")), d.Action); diff != "" {
			t.Errorf("argocd-cm-patch.yaml action %s differs (-resource_customizations +argocd-cm-patch.yaml):\n%s", d.Name, diff)
		}
	}
	if want := []string{"restart", "pause", "resume"}; !slices.Equal(names, want) {
		t.Errorf("argocd-cm-patch.yaml defines actions %v, want %v", names, want)
	}
}

// TestRestartActionRestartsAStoredPodSet runs the restart action on a
// PodSet as a real API server stores it and writes the result back, as Argo
// CD does: the API server accepts it, and the new restartedAt is a new
// generation (the operator rolls out a new generation).
func TestRestartActionRestartsAStoredPodSet(t *testing.T) {
	ns := newNamespace(t)
	obj := storePodSet(t, ns, "web", false, readyStatus(1))
	dir := filepath.Join(customizationsRoot(t), "podset.dev", "PodSet", "actions")
	restarted, err := runArgoAction(t.Context(), string(readFile(t, dir, "restart", "action.lua")), obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(t.Context(), restarted); err != nil {
		t.Fatalf("writing the restarted PodSet: %v", err)
	}
	if got, want := restarted.GetGeneration(), obj.GetGeneration()+1; got != want {
		t.Errorf("generation %d after a restart, want %d", got, want)
	}
	if at, _, _ := unstructured.NestedString(restarted.Object, "spec", "template", "metadata", "annotations", restartedAt); at == "" {
		t.Errorf("the stored PodSet has no %s annotation", restartedAt)
	}
}

func readFile(t *testing.T, path ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readObject(t *testing.T, dir, path string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(readFile(t, dir, path), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

// newArgoActionState is a Lua state as Argo CD runs actions in: the
// package, base and table libraries and an os library reduced to its clock
// and date functions, with a one-second budget. release frees it.
func newArgoActionState(ctx context.Context, obj *unstructured.Unstructured) (l *lua.LState, release func(), err error) {
	l = lua.NewState(lua.Options{SkipOpenLibs: true})
	if err := openLuaLibs(l, append(slices.Clip(argoLuaLibs), luaLib{lua.OsLibName, lua.OpenOs})); err != nil {
		l.Close()
		return nil, nil, err
	}
	full := l.GetGlobal(lua.OsLibName).(*lua.LTable)
	reduced := l.NewTable()
	for _, f := range []string{"clock", "date", "difftime", "time"} {
		reduced.RawSetString(f, full.RawGetString(f))
	}
	l.SetGlobal(lua.OsLibName, reduced)
	l.GetField(l.GetField(l.Get(lua.EnvironIndex), "package"), "loaded").(*lua.LTable).RawSetString(lua.OsLibName, reduced)
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, obj.Object))
	return l, func() { l.Close(); cancel() }, nil
}

// runArgoActionScript runs script, the file name of an action's, in a state
// from newArgoActionState and returns the table it returns; release frees
// the state.
func runArgoActionScript(ctx context.Context, name, script string, obj *unstructured.Unstructured) (result *lua.LTable, release func(), err error) {
	l, release, err := newArgoActionState(ctx, obj)
	if err != nil {
		return nil, nil, err
	}
	if err := l.DoString(script); err != nil {
		release()
		return nil, nil, err
	}
	result, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		err := fmt.Errorf("%s returned %s, want a table", name, l.Get(-1).Type())
		release()
		return nil, nil, err
	}
	return result, release, nil
}

// runArgoActionDiscovery runs a discovery.lua and returns the actions it
// offers, by name.
func runArgoActionDiscovery(ctx context.Context, script string, obj *unstructured.Unstructured) ([]argoAction, error) {
	result, release, err := runArgoActionScript(ctx, "discovery.lua", script, obj)
	if err != nil {
		return nil, err
	}
	defer release()
	var actions []argoAction
	var bad error
	result.ForEach(func(k, v lua.LValue) {
		settings, ok := v.(*lua.LTable)
		if !ok {
			bad = fmt.Errorf("action %s is a %s, want a table", k, v.Type())
			return
		}
		actions = append(actions, argoAction{Name: k.String(), Disabled: lua.LVAsBool(settings.RawGetString("disabled"))})
	})
	slices.SortFunc(actions, func(a, b argoAction) int { return strings.Compare(a.Name, b.Name) })
	return actions, bad
}

// runArgoAction runs an action.lua and returns the object it returns.
func runArgoAction(ctx context.Context, script string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	result, release, err := runArgoActionScript(ctx, "action.lua", script, obj)
	if err != nil {
		return nil, err
	}
	defer release()
	out, ok := goValue(result).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("action.lua returned a list, want an object")
	}
	return &unstructured.Unstructured{Object: out}, nil
}

// goValue converts a Lua value back to decoded JSON as Argo CD does: a
// table with a sequence part is an array, another table an object.
func goValue(v lua.LValue) any {
	switch v := v.(type) {
	case lua.LBool:
		return bool(v)
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return float64(v)
	case *lua.LTable:
		if n := v.MaxN(); n > 0 {
			arr := make([]any, 0, n)
			for i := 1; i <= n; i++ {
				arr = append(arr, goValue(v.RawGetInt(i)))
			}
			return arr
		}
		obj := map[string]any{}
		v.ForEach(func(k, item lua.LValue) { obj[k.String()] = goValue(item) })
		return obj
	}
	return nil
}
