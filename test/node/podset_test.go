//go:build node

package node

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// TestCreateScaleDelete: pods of a PodSet start on the real node, answer,
// follow scaling and go with the PodSet.
func TestCreateScaleDelete(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ps := appPodSet(ns, "web", 2, app("v1"))
	create(t, ps)
	waitReady(t, ps)
	checkAnswers(t, ps, "v1")
	for name, p := range pods(t, ps) {
		if p.Spec.NodeName != nodeName {
			t.Errorf("pod %s runs on %q, want the real node", name, p.Spec.NodeName)
		}
	}

	update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](3) })
	waitReady(t, ps)
	checkAnswers(t, ps, "v1")
	update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](1) })
	waitReady(t, ps)
	eventually(t, "pods web-1 and web-2 are gone", func(context.Context) error {
		if got := len(pods(t, ps)); got != 1 {
			return fmt.Errorf("%d pods", got)
		}
		return nil
	})

	if err := suite.client.Delete(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the PodSet's pods are gone", func(context.Context) error {
		if got := len(pods(t, ps)); got != 0 {
			return fmt.Errorf("%d pods", got)
		}
		return nil
	})
}

// TestInPlaceImageUpdates: image updates by tag, to a tag that names the
// same image as another, and by digest finish on a real kubelet, whatever
// image name containerd reports, and keep each pod's UID, IP and node; the
// containers restart once each.
func TestInPlaceImageUpdates(t *testing.T) {
	t.Parallel()
	ps, before, counts := startApp(t, 2)

	for _, step := range []struct {
		what, image, answer string
	}{
		{"a new tag", app("v2"), "v2"},
		// stable names v2's image: containerd reports both as
		// localhost/podset-test/app:stable, the first of the two tags.
		{"an alias of the image it runs", app("stable"), "v2"},
		{"back to the tag that sorts after the alias", app("v2"), "v2"},
		{"a digest", appByDigest(t, "v3"), "v3"},
		{"a tag again", app("v1"), "v1"},
	} {
		setImage(t, ps, step.image)
		waitReady(t, ps)
		checkAnswers(t, ps, step.answer)
		if got := identities(t, ps); !maps.Equal(got, before) {
			t.Errorf("after %s: pods %v, want the same UIDs, IPs and nodes as %v", step.what, got, before)
		}
		got := restartCounts(t, ps)
		for name, n := range got {
			if n != counts[name]+1 {
				t.Errorf("after %s: pod %s restarted %d times, want %d", step.what, name, n, counts[name]+1)
			}
		}
		counts = got
		for name, p := range pods(t, ps) {
			s := p.Status.ContainerStatuses[0]
			t.Logf("%s: %s runs %s; the kubelet reports image %s, image ID %s", step.what, name, p.Spec.Containers[0].Image, s.Image, s.ImageID)
		}
	}
}

// TestBrokenImages: an image that is not on the node, and one that crash-
// loops, each stall the rollout with the kubelet's reason, and a rollback
// recovers without recreating the pod.
func TestBrokenImages(t *testing.T) {
	t.Parallel()
	ps, before, _ := startApp(t, 1)

	for _, broken := range []struct{ image, reason string }{
		// After an in-place change, the kubelet backs off starting the
		// container (the old one exited), so it reports the missing image
		// and CrashLoopBackOff in turn.
		{app("missing"), "ErrImageNeverPull|CrashLoopBackOff"},
		{app("crash"), "CrashLoopBackOff"},
	} {
		setImage(t, ps, broken.image)
		c := waitStalled(t, ps, "ProgressDeadlineExceeded", "web-0", broken.reason)
		t.Logf("%s: Stalled: %s", broken.image, c.Message)
		setImage(t, ps, app("v1"))
		waitReady(t, ps)
		checkAnswers(t, ps, "v1")
		if got := identities(t, ps); !maps.Equal(got, before) {
			t.Errorf("after the rollback from %s: pods %v, want %v", broken.image, got, before)
		}
	}
}

// TestResizes: cpu changes without a restart, memory with one (the
// container's resizePolicy), a resize the node cannot fit recreates the
// pod, and a resize by another writer survives the operator's repair of
// the pod.
func TestResizes(t *testing.T) {
	t.Parallel()
	ps, before, counts := startApp(t, 1)
	ns := ps.Namespace

	resources := func(cpu, memory string) func(*podsetv1alpha1.PodSet) {
		return func(ps *podsetv1alpha1.PodSet) {
			r := &ps.Spec.Template.Spec.Containers[0].Resources
			r.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("32Mi")}
			limit := resource.MustParse("100m")
			if q := resource.MustParse(cpu); q.Cmp(limit) > 0 {
				limit = q
			}
			r.Limits = corev1.ResourceList{corev1.ResourceCPU: limit, corev1.ResourceMemory: resource.MustParse(memory)}
		}
	}
	runs := func(cpu, memory string) func(context.Context) error {
		return func(context.Context) error {
			for name, p := range pods(t, ps) {
				s := p.Status.ContainerStatuses[0].Resources
				if s == nil || !s.Requests.Cpu().Equal(resource.MustParse(cpu)) || !s.Limits.Memory().Equal(resource.MustParse(memory)) {
					return fmt.Errorf("pod %s runs with %+v", name, s)
				}
			}
			return nil
		}
	}

	update(t, ps, resources("20m", "64Mi"))
	waitReady(t, ps)
	eventually(t, "the kubelet runs the pod with 20m cpu", runs("20m", "64Mi"))
	if got := restartCounts(t, ps); !maps.Equal(got, counts) {
		t.Errorf("a cpu resize (NotRequired) restarted containers: %v, want %v", got, counts)
	}

	update(t, ps, resources("20m", "96Mi"))
	waitReady(t, ps)
	eventually(t, "the kubelet runs the pod with a 96Mi memory limit", runs("20m", "96Mi"))
	for name, n := range restartCounts(t, ps) {
		if n != counts[name]+1 {
			t.Errorf("a memory resize (RestartContainer) restarted %s %d times, want %d", name, n-counts[name], 1)
		}
	}
	if got := identities(t, ps); !maps.Equal(got, before) {
		t.Errorf("after the resizes: pods %v, want %v", got, before)
	}
	checkAnswers(t, ps, "v1")

	// Another writer (a VerticalPodAutoscaler) resizes the pod, and
	// someone removes a label the operator owns: the operator puts the
	// label back and leaves the resize alone.
	kubectl(t, "patch", "pod", "web-0", "-n", ns, "--subresource", "resize", "--field-manager", "vpa-updater",
		"-p", `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"30m"}}}]}}`)
	eventually(t, "the kubelet runs the other writer's 30m cpu", runs("30m", "96Mi"))
	kubectl(t, "label", "pod", "web-0", "-n", ns, "app-")
	eventually(t, "the operator puts the label back", func(context.Context) error {
		if got := pods(t, ps)["web-0"].Labels["app"]; got != "web" {
			return fmt.Errorf("label app is %q", got)
		}
		return nil
	})
	if err := runs("30m", "96Mi")(t.Context()); err != nil {
		t.Errorf("the repair reverted the other writer's resize: %v", err)
	}

	// More cpu than the node has: the kubelet reports the resize
	// Infeasible, and the pod is recreated with it.
	update(t, ps, resources("64", "96Mi"))
	eventually(t, "web-0 is recreated", func(context.Context) error {
		p, ok := pods(t, ps)["web-0"]
		if !ok || string(p.UID) == before["web-0"].uid {
			return fmt.Errorf("web-0 is still %v", before["web-0"].uid)
		}
		return nil
	})
	update(t, ps, resources("20m", "96Mi"))
	waitReady(t, ps)
	checkAnswers(t, ps, "v1")
}
