package localcluster

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kwoknode "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	kwokheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	kwokpod "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	kwokconfig "sigs.k8s.io/kwok/pkg/apis/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// kwokModule is the module of kwok's binaries, stages and configuration
// types.
const kwokModule = "sigs.k8s.io/kwok"

// configuration is the kwokctl configuration of the cluster: its options
// and component patches, then the stages, which replace all of kwok's
// defaults: the node stages, pod-complete and pod-delete come from kwok's
// own module, the pod stages that act as a kubelet from hack/kwok/stages.
func (c Cluster) configuration() ([]byte, error) {
	cfg := kwokconfig.KwokctlConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kwokconfig.GroupVersion.String(), Kind: kwokconfig.KwokctlConfigurationKind},
		Options: kwokconfig.KwokctlConfigurationOptions{
			Runtime:                     "binary",
			BindAddress:                 "127.0.0.1",
			KubeApiserverBinary:         filepath.Join(c.ControlPlane, "kube-apiserver"),
			KubeControllerManagerBinary: filepath.Join(c.ControlPlane, "kube-controller-manager"),
			KubeSchedulerBinary:         filepath.Join(c.ControlPlane, "kube-scheduler"),
			KubectlBinary:               filepath.Join(c.ControlPlane, "kubectl"),
			EtcdBinary:                  filepath.Join(c.ControlPlane, "etcd"),
			KwokControllerBinary:        filepath.Join(c.Kwok, "kwok"),
			DisableQPSLimits:            &c.DisableQPSLimits,
		},
		ComponentsPatches: []kwokconfig.ComponentPatches{{
			// kwok manages only the nodes it makes (kwokctl marks them
			// kwok.x-k8s.io/node=fake), so that a real kubelet can join the
			// cluster (hack/node.sh) without kwok taking its node over.
			Name: "kwok-controller",
			ExtraArgs: []kwokconfig.ExtraArgs{
				{Key: "manage-all-nodes", Value: "false"},
				{Key: "manage-nodes-with-annotation-selector", Value: "kwok.x-k8s.io/node=fake"},
			},
		}},
	}
	cfg.Options.KubeAuditPolicy = c.AuditPolicy
	if c.HeartbeatFactor != 0 {
		cfg.Options.HeartbeatFactor = &c.HeartbeatFactor
	}
	if len(c.Controllers) > 0 {
		cfg.ComponentsPatches = append(cfg.ComponentsPatches, kwokconfig.ComponentPatches{
			Name:      "kube-controller-manager",
			ExtraArgs: []kwokconfig.ExtraArgs{{Key: "controllers", Value: strings.Join(c.Controllers, ",")}},
		})
	}
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	stages, err := c.stages()
	if err != nil {
		return nil, err
	}
	docs := append([]string{string(doc)}, stages...)
	return []byte(strings.Join(docs, "---\n")), nil
}

// stages are the Stage documents of the cluster, each ending in a newline.
func (c Cluster) stages() ([]string, error) {
	stages := []string{kwoknode.DefaultNodeInit, kwokheartbeat.DefaultNodeHeartbeatWithLease, kwokpod.DefaultPodComplete}
	if !c.WithoutPodDelete {
		stages = append(stages, kwokpod.DefaultPodDelete)
	}
	files, err := filepath.Glob(filepath.Join(c.Root, "hack", "kwok", "stages", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no stages in %s: is %s the repository root?", filepath.Join(c.Root, "hack", "kwok", "stages"), c.Root)
	}
	for _, f := range files {
		stage, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		stages = append(stages, string(stage))
	}
	for i, s := range stages {
		if !strings.HasSuffix(s, "\n") {
			stages[i] = s + "\n"
		}
	}
	return stages, nil
}

// checkKwokVersion fails when the kwok binary is not of the kwok version
// whose stages and configuration types this program was built with (the
// version go.mod requires): the stages would not be the ones that binary
// ships. A program without module information (a test binary may lack
// it) is not checked.
func (c Cluster) checkKwokVersion() error {
	want := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		want = moduleVersion(info, kwokModule)
	}
	if want == "" {
		return nil
	}
	bin := filepath.Join(c.Kwok, "kwok")
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("reading the module version of %s: %w", bin, err)
	}
	if got := moduleVersion(info, kwokModule); got != want {
		return fmt.Errorf("%s is kwok %s, but the stages are those of %s %s (go.mod): build kwok at %s (`make controlplane`)",
			bin, strconv.Quote(got), kwokModule, want, want)
	}
	return nil
}

// moduleVersion is the version of module path in info: the main module's
// (a binary built with `go install path@version`) or a dependency's (one
// built inside another module), "" when it has none.
func moduleVersion(info *debug.BuildInfo, path string) string {
	if info.Main.Path == path {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}
