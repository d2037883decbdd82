//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podset-dev/podset-operator/test/testenv"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitTimeout bounds every wait of the suite. It is generous on purpose: it
// only turns a hang into a failure, and a loaded two-core machine runs a
// whole control plane here.
const waitTimeout = 3 * time.Minute

// pollInterval is how often eventually checks again.
const pollInterval = 250 * time.Millisecond

// wait is the suite's waiting: eventually calls check until it returns
// nil, then logs what (with how long it took, for the reader of -v output,
// not as a threshold), and fails the test with check's last error when that
// does not happen within waitTimeout; consistently calls check until a
// duration has passed, and fails the test the first time it returns an
// error.
var (
	wait         = testenv.Waiter{Timeout: waitTimeout, Interval: pollInterval, Log: true}
	eventually   = wait.Eventually
	consistently = wait.Consistently
)

// runTool runs a command line tool with the suite's admin kubeconfig in its
// environment and returns its standard output, failing the test with its
// standard error when it fails.
func runTool(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = suite.root
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// scale sets the replicas of obj (a Deployment or a PodSet) through its
// scale subresource, as `kubectl scale` and a HorizontalPodAutoscaler do,
// and returns the Scale the API server answers with.
func scale(t *testing.T, obj client.Object, replicas int32) *autoscalingv1.Scale {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	s := &autoscalingv1.Scale{}
	err := suite.client.SubResource("scale").Patch(t.Context(), obj,
		client.RawPatch(types.MergePatchType, patch), client.WithSubResourceBody(s))
	if err != nil {
		t.Fatalf("scaling %T %s to %d: %v", obj, client.ObjectKeyFromObject(obj), replicas, err)
	}
	return s
}

// listPods returns the pods of namespace ns that match labels, by name.
func listPods(ctx context.Context, ns string, labels client.MatchingLabels) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := suite.client.List(ctx, &list, client.InNamespace(ns), labels); err != nil {
		return nil, err
	}
	pods := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	return pods, nil
}

// checkRunningAndReady is nil when pod is live (not terminating), Running
// and Ready, and says what is missing otherwise.
func checkRunningAndReady(pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s is terminating", pod.Name)
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("pod %s is %s, not Running", pod.Name, pod.Status.Phase)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("pod %s is Running but not Ready", pod.Name)
}

// checkGone is nil when obj no longer exists.
func checkGone(ctx context.Context, obj client.Object) error {
	err := suite.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	default:
		return fmt.Errorf("%T %s still exists (deletionTimestamp %v)", obj, client.ObjectKeyFromObject(obj), obj.GetDeletionTimestamp())
	}
}

// newNamespace creates a namespace named after prefix with the given labels
// and deletes it when the test ends.
func newNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ns := testenv.Namespace(t, suite.client, prefix, labels)
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		err := suite.client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	return ns
}

// describeCluster is what a person would look at when the workloads of
// namespace ns do not come up: its Deployments, ReplicaSets, pods and
// events, the nodes, and the end of the kube-controller-manager's and
// kwok's logs. It is for a failure message, so errors are part of it.
func describeCluster(ns string) string {
	var b strings.Builder
	run := func(tail int, name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Join(suite.root, "bin", "kwok-work"))
		out, err := cmd.CombinedOutput()
		fmt.Fprintf(&b, "$ %s %s\n%s", filepath.Base(name), strings.Join(args, " "), lastLines(string(out), tail))
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	kubectl := []string{"--kubeconfig", suite.kubeconfig}
	run(100, suite.kubectl, append(kubectl, "get", "deployments,replicasets,pods", "-o", "wide", "-n", ns)...)
	run(100, suite.kubectl, append(kubectl, "get", "events", "-n", ns, "--sort-by", ".metadata.creationTimestamp")...)
	run(100, suite.kubectl, append(kubectl, "get", "nodes", "-o", "wide")...)
	for _, component := range []string{"kube-controller-manager", "kwok-controller"} {
		run(40, filepath.Join(suite.env.kwokDir, "kwokctl"), "--name", suite.cluster, "logs", component)
	}
	return b.String()
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
