package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	podsetac "github.com/podset-dev/podset-operator/applyconfig/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), ns) })
	return ns.Name
}

// podSet is a minimal valid PodSet; mutate adjusts it for one case.
func podSet(ns string, mutate ...func(*podsetv1alpha1.PodSet)) *podsetv1alpha1.PodSet {
	b := fixture.PodSet(ns, "web").Template(corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}},
	}}).Mutate(func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = nil })
	for _, m := range mutate {
		b.Mutate(m)
	}
	return b.Obj()
}

func containerSC(mutate func(*corev1.SecurityContext)) func(*podsetv1alpha1.PodSet) {
	return func(ps *podsetv1alpha1.PodSet) {
		sc := &corev1.SecurityContext{}
		mutate(sc)
		ps.Spec.Template.Spec.Containers[0].SecurityContext = sc
	}
}

func TestSampleIsAcceptedWithSchemaDefaults(t *testing.T) {
	ns := newNamespace(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "podset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &podsetv1alpha1.PodSet{}
	if err := yaml.UnmarshalStrict(data, sample); err != nil {
		t.Fatal(err)
	}
	sample.Namespace = ns
	if err := env.Client.Create(t.Context(), sample); err != nil {
		t.Fatalf("the sample is refused: %v", err)
	}

	minimal := podSet(ns, func(ps *podsetv1alpha1.PodSet) { ps.Name = "minimal" })
	if err := env.Client.Create(t.Context(), minimal); err != nil {
		t.Fatal(err)
	}
	got := &podsetv1alpha1.PodSet{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(minimal), got); err != nil {
		t.Fatal(err)
	}
	want := podsetv1alpha1.PodSetSpec{
		Replicas: ptr.To[int32](1),
		Template: minimal.Spec.Template,
		UpdateStrategy: podsetv1alpha1.PodSetUpdateStrategy{
			Type: podsetv1alpha1.RollingUpdateStrategyType, PodUpdatePolicy: podsetv1alpha1.InPlaceIfPossibleUpdatePolicy,
		},
		DrainSeconds:            ptr.To[int32](podsetv1alpha1.DefaultDrainSeconds),
		MinReadySeconds:         0,
		ProgressDeadlineSeconds: ptr.To[int32](600),
		RevisionHistoryLimit:    ptr.To[int32](10),
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("spec read back (-want +got):\n%s", diff)
	}

	withRolling := podSet(ns, func(ps *podsetv1alpha1.PodSet) {
		ps.Name = "rolling"
		ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{}
	})
	if err := env.Client.Create(t.Context(), withRolling); err != nil {
		t.Fatal(err)
	}
	if got := withRolling.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable; got == nil || *got != intstr.FromInt32(1) {
		t.Errorf("maxUnavailable defaults to %v, want 1", got)
	}
	if got := withRolling.Spec.UpdateStrategy.RollingUpdate.Partition; got == nil || *got != 0 {
		t.Errorf("partition defaults to %v, want 0", got)
	}
}

func TestAdmissionRefusals(t *testing.T) {
	ns := newNamespace(t)
	type refusalCase struct {
		mutate    func(*podsetv1alpha1.PodSet)
		wantField string
	}
	cases := map[string]refusalCase{
		"negative replicas": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](-1) },
			wantField: "spec.replicas",
		},
		"too many replicas": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](podsetv1alpha1.MaxReplicas + 1) },
			wantField: "spec.replicas",
		},
		"negative lostNodeReplacement.afterSeconds": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.LostNodeReplacement = &podsetv1alpha1.LostNodeReplacement{AfterSeconds: ptr.To[int32](-1)}
			},
			wantField: "spec.lostNodeReplacement.afterSeconds",
		},
		"lostNodeReplacement.afterSeconds over a day": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.LostNodeReplacement = &podsetv1alpha1.LostNodeReplacement{AfterSeconds: ptr.To[int32](podsetv1alpha1.MaxLostNodeAfterSeconds + 1)}
			},
			wantField: "spec.lostNodeReplacement.afterSeconds",
		},
		"name too long for pod names": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Name = strings.Repeat("a", podsetv1alpha1.MaxNameLength+1) },
			wantField: "metadata.name",
		},
		"name that is no DNS label": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Name = "web.v2" },
			wantField: "metadata.name",
		},
		"template without containers": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers = nil },
			wantField: "spec.template.spec.containers",
		},
		"template with a pod name": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Name = "fixed" },
			wantField: "spec.template.metadata.name",
		},
		"template using the operator's labels": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Labels = map[string]string{podsetv1alpha1.NameLabel: "other"}
			},
			wantField: "spec.template.metadata.labels",
		},
		"maxUnavailable of zero": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromInt32(0))}
			},
			wantField: "spec.updateStrategy.rollingUpdate.maxUnavailable",
		},
		"maxUnavailable over 100%": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromString("150%"))}
			},
			wantField: "spec.updateStrategy.rollingUpdate.maxUnavailable",
		},
		"negative minReadySeconds": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.MinReadySeconds = -1 },
			wantField: "spec.minReadySeconds",
		},
		"progress deadline of zero": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](0) },
			wantField: "spec.progressDeadlineSeconds",
		},
		"progress deadline not above minReadySeconds": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.MinReadySeconds = 30
				ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](30)
			},
			wantField: "spec.progressDeadlineSeconds: must be greater than spec.minReadySeconds",
		},
		"minReadySeconds above the default deadline": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.MinReadySeconds = 601 },
			wantField: "spec.progressDeadlineSeconds: must be greater than spec.minReadySeconds",
		},
		"negative revisionHistoryLimit": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.RevisionHistoryLimit = ptr.To[int32](-1) },
			wantField: "spec.revisionHistoryLimit",
		},
		"negative ordinals.start": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: -1} },
			wantField: "spec.ordinals.start",
		},
		"ordinals.start past the highest ordinal": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: podsetv1alpha1.MaxReplicas}
			},
			wantField: "spec.ordinals.start",
		},
		"ordinals.start + replicas past the highest ordinal": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Replicas = ptr.To[int32](10)
				ps.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: podsetv1alpha1.MaxReplicas - 9}
			},
			wantField: "spec.ordinals.start: start + replicas must be at most 10000",
		},
		"disruptionBudget with neither bound": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{} },
			wantField: "spec.disruptionBudget: exactly one of maxUnavailable and minAvailable must be set",
		},
		"disruptionBudget with both bounds": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)), MinAvailable: ptr.To(intstr.FromInt32(1)),
				}
			},
			wantField: "spec.disruptionBudget: exactly one of maxUnavailable and minAvailable must be set",
		},
		"negative disruptionBudget.maxUnavailable": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(-1))}
			},
			wantField: "spec.disruptionBudget.maxUnavailable",
		},
		"disruptionBudget.minAvailable over 100%": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MinAvailable: ptr.To(intstr.FromString("101%"))}
			},
			wantField: "spec.disruptionBudget.minAvailable",
		},
		"disruptionBudget.minAvailable not a percentage": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MinAvailable: ptr.To(intstr.FromString("half"))}
			},
			wantField: "spec.disruptionBudget.minAvailable",
		},
		"disruptionBudget.maxUnavailable with a leading zero": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("05%"))}
			},
			wantField: "spec.disruptionBudget.maxUnavailable",
		},
		"negative partition": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{Partition: ptr.To[int32](-1)}
			},
			wantField: "spec.updateStrategy.rollingUpdate.partition",
		},
		"partition above the most replicas": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{Partition: ptr.To[int32](podsetv1alpha1.MaxReplicas + 1)}
			},
			wantField: "spec.updateStrategy.rollingUpdate.partition",
		},
		"negative drainSeconds": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.DrainSeconds = ptr.To[int32](-1) },
			wantField: "spec.drainSeconds",
		},
		"drainSeconds over five minutes": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.DrainSeconds = ptr.To[int32](301) },
			wantField: "spec.drainSeconds",
		},
		"drainSeconds as long as the progress deadline": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DrainSeconds, ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](60), ptr.To[int32](60)
			},
			wantField: "spec.drainSeconds",
		},
		"drainSeconds longer than the pod's termination grace period": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.DrainSeconds = ptr.To[int32](10)
				ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
			},
			wantField: "spec.drainSeconds",
		},
		"drainSeconds longer than the default termination grace period": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.DrainSeconds = ptr.To[int32](31) },
			wantField: "spec.drainSeconds",
		},
		"the default drainSeconds beside a grace period of 0": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
			},
			wantField: "spec.drainSeconds",
		},
		"the deprecated inPlaceDrainSeconds, longer than drainSeconds": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.UpdateStrategy.InPlaceDrainSeconds = ptr.To[int32](5) },
			wantField: "spec.updateStrategy.inPlaceDrainSeconds",
		},
		"unknown update strategy": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.UpdateStrategy.Type = "Recreate" },
			wantField: "spec.updateStrategy.type",
		},
		"unknown pod update policy": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.UpdateStrategy.PodUpdatePolicy = "InPlace" },
			wantField: "spec.updateStrategy.podUpdatePolicy",
		},
		"rollingUpdate with OnDelete": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy = podsetv1alpha1.PodSetUpdateStrategy{
					Type:          podsetv1alpha1.OnDeleteStrategyType,
					RollingUpdate: &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromInt32(2))},
				}
			},
			wantField: "spec.updateStrategy.rollingUpdate",
		},
		"privileged container": {
			mutate:    containerSC(func(sc *corev1.SecurityContext) { sc.Privileged = ptr.To(true) }),
			wantField: "spec.template.spec.containers[name=app].securityContext.privileged",
		},
		"privilege escalation": {
			mutate:    containerSC(func(sc *corev1.SecurityContext) { sc.AllowPrivilegeEscalation = ptr.To(true) }),
			wantField: "spec.template.spec.containers[name=app].securityContext.allowPrivilegeEscalation",
		},
		"added capability": {
			mutate: containerSC(func(sc *corev1.SecurityContext) {
				sc.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE", "SYS_ADMIN"}}
			}),
			wantField: "spec.template.spec.containers[name=app].securityContext.capabilities.add",
		},
		"privileged init container": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.InitContainers = []corev1.Container{{
					Name: "init", Image: "busybox:1.36", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				}}
			},
			wantField: "spec.template.spec.initContainers[name=init].securityContext.privileged",
		},
		"host port": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
			},
			wantField: "spec.template.spec.containers[name=app].ports.hostPort",
		},
		"host network": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.HostNetwork = true },
			wantField: "spec.template.spec.hostNetwork",
		},
		"host PID": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.HostPID = true },
			wantField: "spec.template.spec.hostPID",
		},
		"host IPC": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.HostIPC = true },
			wantField: "spec.template.spec.hostIPC",
		},
		"container name that is no DNS label": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Name = "App_1" },
			wantField: "spec.template.spec.containers[name=App_1].name",
		},
		"container port out of range": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000}}
			},
			wantField: "spec.template.spec.containers[name=app].ports.containerPort",
		},
		"request above its limit": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
				}
			},
			wantField: "spec.template.spec.containers[name=app].resources.requests",
		},
		"mount of a missing volume": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			},
			wantField: "spec.template.spec.containers[name=app].volumeMounts.name",
		},
		"invalid template label value": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Labels = map[string]string{"app": "not valid"} },
			wantField: "spec.template.metadata.labels",
		},
		"empty container list": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers = []corev1.Container{} },
			wantField: "spec.template.spec.containers",
		},
		"serviceName with upper-case letters": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "Web" },
			wantField: "spec.serviceName",
		},
		"serviceName with a dot (a DNS subdomain, not a label)": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "web.svc" },
			wantField: "spec.serviceName",
		},
		"serviceName starting with a dash": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "-web" },
			wantField: "spec.serviceName",
		},
		"serviceName longer than a DNS label": {
			mutate:    func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = strings.Repeat("s", 64) },
			wantField: "spec.serviceName",
		},
		"a template hostname beside serviceName": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.ServiceName, ps.Spec.Template.Spec.Hostname = "web", "same-for-every-pod"
			},
			wantField: "spec.template.spec.hostname",
		},
		"a template subdomain other than serviceName": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.ServiceName, ps.Spec.Template.Spec.Subdomain = "web", "other"
			},
			wantField: "spec.template.spec.subdomain",
		},
		"hostPath volume": {
			mutate: func(ps *podsetv1alpha1.PodSet) {
				ps.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/"},
				}}}
			},
			wantField: "spec.template.spec.volumes[name=root].hostPath",
		},
	}
	// A container's and the pod's security context refuse the same three
	// settings, each under its own path.
	for _, sc := range []struct {
		kind, path string
		// fields puts an empty security context in place and returns where
		// its runAsUser, runAsNonRoot and seccompProfile are.
		fields func(*podsetv1alpha1.PodSet) (**int64, **bool, **corev1.SeccompProfile)
	}{
		{"container", "spec.template.spec.containers[name=app].securityContext", func(ps *podsetv1alpha1.PodSet) (**int64, **bool, **corev1.SeccompProfile) {
			sc := &corev1.SecurityContext{}
			ps.Spec.Template.Spec.Containers[0].SecurityContext = sc
			return &sc.RunAsUser, &sc.RunAsNonRoot, &sc.SeccompProfile
		}},
		{"pod", "spec.template.spec.securityContext", func(ps *podsetv1alpha1.PodSet) (**int64, **bool, **corev1.SeccompProfile) {
			sc := &corev1.PodSecurityContext{}
			ps.Spec.Template.Spec.SecurityContext = sc
			return &sc.RunAsUser, &sc.RunAsNonRoot, &sc.SeccompProfile
		}},
	} {
		cases[sc.kind+" running as root"] = refusalCase{
			mutate:    func(ps *podsetv1alpha1.PodSet) { runAsUser, _, _ := sc.fields(ps); *runAsUser = ptr.To[int64](0) },
			wantField: sc.path + ".runAsUser",
		}
		cases[sc.kind+" allowed to run as root"] = refusalCase{
			mutate:    func(ps *podsetv1alpha1.PodSet) { _, runAsNonRoot, _ := sc.fields(ps); *runAsNonRoot = ptr.To(false) },
			wantField: sc.path + ".runAsNonRoot",
		}
		cases[sc.kind+" without seccomp"] = refusalCase{
			mutate: func(ps *podsetv1alpha1.PodSet) {
				_, _, seccomp := sc.fields(ps)
				*seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
			},
			wantField: sc.path + ".seccompProfile.type",
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := podSet(ns, tc.mutate)
			err := env.Client.Create(t.Context(), ps)
			if err == nil {
				t.Fatalf("the API server accepted the PodSet; want a refusal naming %s", tc.wantField)
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Errorf("refusal does not name %s:\n%v", tc.wantField, err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestAdmissionAcceptsWhatRestrictedAllows(t *testing.T) {
	ns := newNamespace(t)
	ps := podSet(ns, containerSC(func(sc *corev1.SecurityContext) {
		sc.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}
		sc.RunAsNonRoot = ptr.To(true)
		sc.AllowPrivilegeEscalation = ptr.To(false)
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/app.json")}
	}), func(ps *podsetv1alpha1.PodSet) {
		ps.Name = strings.Repeat("a", podsetv1alpha1.MaxNameLength)
		ps.Spec.Replicas = ptr.To[int32](0)
		ps.Spec.UpdateStrategy.RollingUpdate = &podsetv1alpha1.RollingUpdatePodSet{MaxUnavailable: ptr.To(intstr.FromString("25%"))}
	})
	if err := env.Client.Create(t.Context(), ps); err != nil {
		t.Fatalf("a PodSet within the restricted profile was refused: %v", err)
	}
	ps.Spec.Replicas = ptr.To[int32](podsetv1alpha1.MaxReplicas)
	if err := env.Client.Update(t.Context(), ps); err != nil {
		t.Fatalf("replicas = MaxReplicas was refused: %v", err)
	}
}

// TestAdmissionAcceptsTheLongestDNSNames checks that the longest pod
// name (a 58-character PodSet name and ordinal 9999: 63 characters) with
// the longest serviceName (63) is accepted, and that the pod the
// operator makes of it is valid: each is a DNS label, so
// <pod>.<serviceName>.<namespace>.svc. is at most 63+1+63+1+63+5 = 196
// characters, within DNS's 253 for any cluster domain of up to 57
// characters (cluster.local has 13). The cluster domain is the kubelet's
// and the namespace the request's, neither of which the PodSet's schema
// sees, so admission checks the labels and the docs say the rest.
func TestAdmissionAcceptsTheLongestDNSNames(t *testing.T) {
	ns := newNamespace(t)
	ps := podSet(ns, func(ps *podsetv1alpha1.PodSet) {
		ps.Name = strings.Repeat("p", podsetv1alpha1.MaxNameLength)
		ps.Spec.ServiceName = strings.Repeat("s", 63)
		ps.Spec.Replicas = ptr.To[int32](1)
		ps.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: podsetv1alpha1.MaxReplicas - 1}
	})
	if err := env.Client.Create(t.Context(), ps); err != nil {
		t.Fatalf("refused: %v", err)
	}
	pod, err := podset.DesiredPod(ps, podsetv1alpha1.MaxReplicas-1)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(*pod.Name) + 1 + len(*pod.Spec.Subdomain); got != 127 || *pod.Spec.Hostname != *pod.Name {
		t.Errorf("<pod>.<serviceName> is %d characters, hostname %q; want 127 and the pod's name", got, *pod.Spec.Hostname)
	}
	// The API server's own pod validation (hostname and subdomain DNS
	// labels), on a dry run: the pod is not kept.
	pod.OwnerReferences = nil
	if err := env.Client.Apply(t.Context(), pod, client.FieldOwner("test"), client.DryRunAll); err != nil {
		t.Errorf("the API server refuses the pod with the longest DNS name: %v", err)
	}
}

// TestAdmissionAcceptsOrdinalsAndBudgetsAtTheirBounds checks the edges the
// rules of spec.ordinals and spec.disruptionBudget allow.
func TestAdmissionAcceptsOrdinalsAndBudgetsAtTheirBounds(t *testing.T) {
	ns := newNamespace(t)
	cases := map[string]func(*podsetv1alpha1.PodSet){
		"the highest ordinal 9999": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.Replicas = ptr.To[int32](10)
			ps.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: podsetv1alpha1.MaxReplicas - 10}
		},
		"start with no replicas": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.Replicas = ptr.To[int32](0)
			ps.Spec.Ordinals = &podsetv1alpha1.PodSetOrdinals{Start: podsetv1alpha1.MaxReplicas - 1}
		},
		"the deprecated inPlaceDrainSeconds, equal to drainSeconds": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DrainSeconds, ps.Spec.UpdateStrategy.InPlaceDrainSeconds = ptr.To[int32](5), ptr.To[int32](5)
		},
		"the deprecated inPlaceDrainSeconds at its old default, 2, drainSeconds unset": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.UpdateStrategy.InPlaceDrainSeconds = ptr.To[int32](2)
		},
		"drainSeconds as long as the termination grace period": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DrainSeconds = ptr.To[int32](20)
			ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
		},
		"drainSeconds 0 beside a grace period of 0": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DrainSeconds = ptr.To[int32](0)
			ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
		},
		"drainSeconds just under the progress deadline": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DrainSeconds, ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](59), ptr.To[int32](60)
			ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](90)
		},
		"maxUnavailable 0": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		},
		"maxUnavailable 0%": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("0%"))}
		},
		"minAvailable 100%": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MinAvailable: ptr.To(intstr.FromString("100%"))}
		},
		"minAvailable 5": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(5))}
		},
		// The longest <pod>.<serviceName> (63 + 1 + 63) is checked by
		// TestAdmissionAcceptsTheLongestDNSNames.
		"serviceName naming no Service": func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "no-such-service" },
		"serviceName of one character":  func(ps *podsetv1alpha1.PodSet) { ps.Spec.ServiceName = "a" },
		"a template subdomain equal to serviceName (a rollback of a revision writes it so)": func(ps *podsetv1alpha1.PodSet) {
			ps.Spec.ServiceName, ps.Spec.Template.Spec.Subdomain = "web", "web"
		},
	}
	i := 0
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			i++
			ps := podSet(ns, mutate, func(ps *podsetv1alpha1.PodSet) { ps.Name = fmt.Sprintf("bounds-%d", i) })
			if err := env.Client.Create(t.Context(), ps); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

func TestLostNodeReplacementIsOffByDefaultAndDefaultsItsDelay(t *testing.T) {
	ns := newNamespace(t)
	off := podSet(ns)
	if err := env.Client.Create(t.Context(), off); err != nil {
		t.Fatal(err)
	}
	if off.Spec.LostNodeReplacement != nil {
		t.Errorf("spec.lostNodeReplacement defaulted to %+v; want it unset (off)", off.Spec.LostNodeReplacement)
	}
	on := podSet(ns, func(ps *podsetv1alpha1.PodSet) {
		ps.Name = "on"
		ps.Spec.LostNodeReplacement = &podsetv1alpha1.LostNodeReplacement{}
	})
	if err := env.Client.Create(t.Context(), on); err != nil {
		t.Fatal(err)
	}
	if got := on.Spec.LostNodeReplacement.AfterSeconds; got == nil || *got != podsetv1alpha1.DefaultLostNodeAfterSeconds {
		t.Errorf("spec.lostNodeReplacement.afterSeconds defaulted to %v, want %d", got, podsetv1alpha1.DefaultLostNodeAfterSeconds)
	}
}

func TestScaleSubresource(t *testing.T) {
	ns := newNamespace(t)
	ps := podSet(ns)
	if err := env.Client.Create(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	// The operator publishes the selector in status; the scale subresource
	// reads it from there (labelSelectorPath), which is what an HPA uses.
	status := podsetac.PodSet(ps.Name, ns).WithStatus(podsetac.PodSetStatus().
		WithReplicas(1).WithSelector(podsetv1alpha1.NameLabel + "=" + ps.Name))
	if err := env.Client.Status().Apply(t.Context(), status, client.FieldOwner("podset-operator"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}

	scale := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(t.Context(), ps, scale); err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 1 || scale.Status.Replicas != 1 || scale.Status.Selector != "podset.dev/name=web" {
		t.Errorf("scale = %+v, want spec 1, status 1, selector podset.dev/name=web", scale)
	}

	// kubectl scale podset web --replicas 5
	scale.Spec.Replicas = 5
	if err := env.Client.SubResource("scale").Update(t.Context(), ps, client.WithSubResourceBody(scale)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	if got := *ps.Spec.Replicas; got != 5 {
		t.Errorf("spec.replicas after scaling = %d, want 5", got)
	}
}

func TestGitOpsManagerAndOperatorShareThePodSet(t *testing.T) {
	ns := newNamespace(t)
	spec := func(replicas int32) *podsetac.PodSetApplyConfiguration {
		return podsetac.PodSet("web", ns).WithSpec(podsetac.PodSetSpec().
			WithReplicas(replicas).
			WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().
				WithContainers(corev1ac.Container().WithName("app").WithImage("busybox:1.36")))))
	}
	// Flux applies the spec without forcing, as it does for every object it
	// manages; the operator applies status with its own manager.
	if err := env.Client.Apply(t.Context(), spec(2), client.FieldOwner("kustomize-controller")); err != nil {
		t.Fatal(err)
	}
	status := podsetac.PodSet("web", ns).WithStatus(podsetac.PodSetStatus().
		WithObservedGeneration(1).WithReplicas(2).
		WithConditions(metav1ac.Condition().WithType(podsetv1alpha1.ReadyCondition).WithStatus(metav1.ConditionFalse).
			WithReason(podsetv1alpha1.NotReadyReason).WithMessage("0/2 ready").WithLastTransitionTime(metav1.Now())))
	if err := env.Client.Status().Apply(t.Context(), status, client.FieldOwner("podset-operator")); err != nil {
		t.Fatalf("the operator's status apply conflicts with the GitOps manager: %v", err)
	}
	if err := env.Client.Apply(t.Context(), spec(3), client.FieldOwner("kustomize-controller")); err != nil {
		t.Fatalf("the GitOps manager's second apply conflicts with the operator: %v", err)
	}

	got := &podsetv1alpha1.PodSet{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 || got.Status.Replicas != 2 || len(got.Status.Conditions) != 1 {
		t.Errorf("spec.replicas = %d, status.replicas = %d, conditions = %d; want 3, 2, 1",
			*got.Spec.Replicas, got.Status.Replicas, len(got.Status.Conditions))
	}
	managers := map[string]string{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager] = mf.Subresource
	}
	if diff := cmp.Diff(map[string]string{"kustomize-controller": "", "podset-operator": "status"}, managers); diff != "" {
		t.Errorf("field managers (-want +got):\n%s", diff)
	}
}
