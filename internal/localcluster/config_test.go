package localcluster

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kwokconfig "sigs.k8s.io/kwok/pkg/apis/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// document is what the test reads of each document of a configuration.
type document struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func TestConfiguration(t *testing.T) {
	base := Cluster{Name: "podset", Root: "../..", ControlPlane: "/cp", Kwok: "/kwok", Nodes: 3}
	bench := base
	bench.DisableQPSLimits, bench.WithoutPodDelete = true, true
	bench.Controllers = []string{"deployment-controller", "namespace-controller"}
	e2e := base
	e2e.HeartbeatFactor = 0.5

	kwokPatch := kwokconfig.ComponentPatches{Name: "kwok-controller", ExtraArgs: []kwokconfig.ExtraArgs{
		{Key: "manage-all-nodes", Value: "false"},
		{Key: "manage-nodes-with-annotation-selector", Value: "kwok.x-k8s.io/node=fake"},
	}}
	kwokStages := []string{"node-initialize", "node-heartbeat-with-lease", "pod-complete"}
	ownStages := []string{"pod-readiness", "pod-ready", "pod-update"}
	for name, tc := range map[string]struct {
		cluster         Cluster
		wantQPSDisabled bool
		wantHeartbeat   *float64
		wantPatches     []kwokconfig.ComponentPatches
		wantStages      []string
	}{
		"make run": {
			cluster:     base,
			wantPatches: []kwokconfig.ComponentPatches{kwokPatch},
			wantStages:  slices.Concat(kwokStages, []string{"pod-delete"}, ownStages),
		},
		"e2e": {
			cluster:       e2e,
			wantHeartbeat: new(0.5),
			wantPatches:   []kwokconfig.ComponentPatches{kwokPatch},
			wantStages:    slices.Concat(kwokStages, []string{"pod-delete"}, ownStages),
		},
		"bench": {
			cluster:         bench,
			wantQPSDisabled: true,
			wantPatches: []kwokconfig.ComponentPatches{kwokPatch, {Name: "kube-controller-manager", ExtraArgs: []kwokconfig.ExtraArgs{
				{Key: "controllers", Value: "deployment-controller,namespace-controller"},
			}}},
			wantStages: slices.Concat(kwokStages, ownStages),
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := tc.cluster.configuration()
			if err != nil {
				t.Fatal(err)
			}
			docs := strings.Split(string(out), "---\n")
			var cfg kwokconfig.KwokctlConfiguration
			if err := yaml.UnmarshalStrict([]byte(docs[0]), &cfg); err != nil {
				t.Fatal(err)
			}
			want := kwokconfig.KwokctlConfigurationOptions{
				Runtime:                     "binary",
				BindAddress:                 "127.0.0.1",
				KubeApiserverBinary:         "/cp/kube-apiserver",
				KubeControllerManagerBinary: "/cp/kube-controller-manager",
				KubeSchedulerBinary:         "/cp/kube-scheduler",
				KubectlBinary:               "/cp/kubectl",
				EtcdBinary:                  "/cp/etcd",
				KwokControllerBinary:        "/kwok/kwok",
				DisableQPSLimits:            new(tc.wantQPSDisabled),
				HeartbeatFactor:             tc.wantHeartbeat,
			}
			if diff := cmp.Diff(want, cfg.Options); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPatches, cfg.ComponentsPatches); diff != "" {
				t.Errorf("component patches (-want +got):\n%s", diff)
			}
			if cfg.APIVersion != "config.kwok.x-k8s.io/v1alpha1" || cfg.Kind != "KwokctlConfiguration" {
				t.Errorf("the first document is a %s %s, want a config.kwok.x-k8s.io/v1alpha1 KwokctlConfiguration", cfg.APIVersion, cfg.Kind)
			}
			if diff := cmp.Diff(tc.wantStages, stageNames(t, docs[1:])); diff != "" {
				t.Errorf("stages (-want +got):\n%s", diff)
			}
		})
	}
}

// stageNames is the names of the kwok Stages of the configuration's
// documents after the first, each of which must be a Stage.
func stageNames(t *testing.T, docs []string) []string {
	t.Helper()
	var stages []string
	for _, d := range docs {
		var doc document
		if err := yaml.Unmarshal([]byte(d), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Kind != "Stage" {
			t.Errorf("document %s is a %s, want a Stage", doc.Metadata.Name, doc.Kind)
		}
		stages = append(stages, doc.Metadata.Name)
	}
	return stages
}

func TestModuleVersion(t *testing.T) {
	for name, tc := range map[string]struct {
		info debug.BuildInfo
		want string
	}{
		"go install sigs.k8s.io/kwok/cmd/kwok@v0.8.0": {
			info: debug.BuildInfo{Main: debug.Module{Path: kwokModule, Version: "v0.8.0"}},
			want: "v0.8.0",
		},
		"built inside another module": {
			info: debug.BuildInfo{Main: debug.Module{Path: "example.com/tools"}, Deps: []*debug.Module{{Path: kwokModule, Version: "v0.8.0"}}},
			want: "v0.8.0",
		},
		"replaced": {
			info: debug.BuildInfo{Deps: []*debug.Module{{Path: kwokModule, Version: "v0.7.0", Replace: &debug.Module{Path: "example.com/kwok", Version: "v0.8.1"}}}},
			want: "v0.8.1",
		},
		"not kwok": {
			info: debug.BuildInfo{Main: debug.Module{Path: "example.com/tools"}},
			want: "",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := moduleVersion(&tc.info, kwokModule); got != tc.want {
				t.Errorf("moduleVersion = %q, want %q", got, tc.want)
			}
		})
	}
}
