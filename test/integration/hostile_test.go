package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/internal/podset"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// hostileEdits are ways a PodSet template can be wrong or odd. Each is
// legal for the CRD's OpenAPI types; the question is whether admission
// refuses it or the API server accepts the pods made from it.
var hostileEdits = map[string]func(*podsetv1alpha1.PodSet, *rand.Rand){
	"container name not a DNS label": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) { ps.Spec.Template.Spec.Containers[0].Name = "App_1" },
	"empty image":                    func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) { ps.Spec.Template.Spec.Containers[0].Image = "" },
	"image with spaces":              func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) { ps.Spec.Template.Spec.Containers[0].Image = "busy box" },
	"port out of range": func(ps *podsetv1alpha1.PodSet, r *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 65536 + r.Int32N(1000)}}
	},
	"port zero": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 0}}
	},
	"negative cpu request": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
	},
	"limit below request": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}
	},
	"mount of a missing volume": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/data"}}
	},
	"invalid label key": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Labels = map[string]string{"bad key!": "x"}
	},
	"invalid label value": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Labels = map[string]string{"app": "not a valid value"}
	},
	"restartPolicy Never": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	},
	"unknown restartPolicy": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.RestartPolicy = "Sometimes"
	},
	"negative termination grace": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-5)
	},
	"probe on a named port that does not exist": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("web")},
		}}
	},
	"init container named like a container": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "app", Image: "busybox:1.36"}}
	},
	"unknown dnsPolicy": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) { ps.Spec.Template.Spec.DNSPolicy = "Bogus" },
	"unknown imagePullPolicy": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].ImagePullPolicy = "Sometimes"
	},
	"huge replica count within bounds": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) { ps.Spec.Replicas = ptr.To[int32](9999) },
	"env var with an odd name": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "1=2", Value: "x"}}
	},
	"readOnlyRootFilesystem false": func(ps *podsetv1alpha1.PodSet, _ *rand.Rand) {
		ps.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false)}
	},
}

// TestHostileTemplatesAreRefusedOrYieldValidPods sends random combinations
// of hostileEdits to the API server. Each PodSet must be refused at
// admission with a message naming a field, or every pod the operator would
// make from it must pass the API server's pod validation (a dry-run apply):
// never a 422 at pod apply time. Forbidden (403) stays possible: admission
// such as PodSecurity depends on the namespace, and the operator reports it
// as Stalled.
func TestHostileTemplatesAreRefusedOrYieldValidPods(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "podset-", nil)
	names := make([]string, 0, len(hostileEdits))
	for n := range hostileEdits {
		names = append(names, n)
	}
	slicesSort(names)
	rng := rand.New(rand.NewPCG(7, 7))
	refused, accepted := 0, 0
	for i := range 60 {
		ps := fixture.PodSet(ns, fmt.Sprintf("h%d", i)).Obj()
		var applied []string
		for range 1 + rng.IntN(2) {
			name := names[rng.IntN(len(names))]
			hostileEdits[name](ps, rng)
			applied = append(applied, name)
		}
		err := env.Client.Create(t.Context(), ps, client.DryRunAll)
		if err != nil {
			refused++
			if !strings.Contains(err.Error(), "spec.") && !strings.Contains(err.Error(), "metadata.") {
				t.Errorf("%v: refused without naming a field: %v", applied, err)
			}
			continue
		}
		accepted++
		ps.UID = "00000000-0000-0000-0000-000000000001"
		pod, err := podset.DesiredPod(ps, 0)
		if err != nil {
			t.Errorf("%v: building the pod: %v", applied, err)
			continue
		}
		// The owner does not exist; a dry run does not check that.
		err = env.Client.Apply(t.Context(), pod, client.FieldOwner(controller.FieldManager), client.ForceOwnership, client.DryRunAll)
		if apierrors.IsInvalid(err) {
			t.Errorf("%v: admitted, but its pods are invalid (422): %v", applied, err)
		}
	}
	t.Logf("%d hostile PodSets refused at admission, %d admitted with valid pods", refused, accepted)
}

func slicesSort(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}
