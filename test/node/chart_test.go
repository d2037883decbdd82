//go:build node

package node

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
)

// The release the test installs, as README says: the release name that
// gives config/default's names, in a namespace enforcing Pod Security
// "restricted".
const (
	releaseName      = "podset-operator"
	releaseNamespace = "podset-system"
	leaseName        = "podset-operator.podset.dev"
	// operatorRepo is where the test's builds of the image are named:
	// the chart's repository behind global.imageRegistry=localhost, so
	// that containerd never tries to pull it.
	operatorRepo = "localhost/podset-dev/podset-operator"
)

// TestChartRunsTheImage installs the chart with the operator's image built
// by hack/image (as `make image` builds it) and imported into the node's
// containerd, in a namespace enforcing Pod Security "restricted", with the
// chart's defaults: 2 replicas with leader election. The operator
// reconciles a PodSet; deleting the leader's pod hands the Lease to the
// other replica, which carries on; `helm upgrade` to a second build and
// `helm uninstall` leave every PodSet and pod as they were.
//
// It is not parallel: the suite's own operator is stopped while it runs.
func TestChartRunsTheImage(t *testing.T) {
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("set HELM (make test-node does)")
	}
	first, second := buildOperatorImage(t, "v0.0.0-node.1"), buildOperatorImage(t, "v0.0.0-node.2")
	pauseSuiteOperator(t)
	apiHost, apiPort := forwardAPIServer(t)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := suite.client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := execKubectl("get", "deployments,replicasets,pods,leases,events", "-n", releaseNamespace, "-o", "wide")
			t.Log(out)
		}
		_, _ = execKubectl("delete", "namespace", releaseNamespace, "--wait=false")
	})
	adoptCRDForHelm(t)

	install := func(verb string, image operatorImage) {
		t.Helper()
		values := map[string]any{
			"global": map[string]any{"imageRegistry": "localhost"},
			// The suite's admission policies stay as they are: taking over
			// a ValidatingAdmissionPolicy that kubectl applied conflicts on
			// its matchConstraints, an atomic field the API server defaults
			// (a fresh install has no such conflict: test/e2e).
			"admissionPolicies": map[string]any{"enabled": false},
			"image":             map[string]any{"tag": image.tag, "digest": image.digest, "pullPolicy": "Never"},
			"nodeSelector":      map[string]any{"podset.dev/real-node": "true", corev1.LabelHostname: nodeName},
			"tolerations":       []any{map[string]any{"key": "podset.dev/real-node", "operator": "Exists"}},
			// The node's API server listens on 127.0.0.1 only, which the
			// kubernetes Service cannot reach from a pod: the pods reach
			// it through forwardAPIServer, by a name its certificate has.
			"extraEnv": []any{
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": "kubernetes.default.svc"},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": apiPort},
			},
			"hostAliases": []any{map[string]any{"ip": apiHost, "hostnames": []any{"kubernetes.default.svc"}}},
		}
		file := filepath.Join(t.TempDir(), "values.yaml")
		data, err := yaml.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out := runHelm(t, helm, verb, releaseName, filepath.Join(suite.root, "charts", "podset-operator"),
			"--namespace", releaseNamespace, "--values", file, "--wait", "--timeout", waitTimeout.String())
		t.Logf("helm %s:\n%s", verb, out)
		waitOperatorRunning(t, image)
	}

	install("install", first)
	leader := waitLeader(t, "")

	ps := appPodSet(newNamespace(t), "web", 2, app("v1"))
	create(t, ps)
	waitReady(t, ps)

	// A leader change: the standby takes the Lease and reconciles.
	if err := suite.client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: leader}}); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, leader)
	update(t, ps, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Replicas = ptr.To[int32](3) })
	waitReady(t, ps)
	before := identities(t, ps)

	// An upgrade to a second build rolls the operator, not the pods.
	install("upgrade", second)
	waitLeader(t, "")
	waitReady(t, ps)
	checkSameIdentities(t, "helm upgrade", before, identities(t, ps))
	// The upgraded operator updates the pods in place.
	setImage(t, ps, app("v2"))
	waitReady(t, ps)
	checkAnswers(t, ps, "v2")
	checkSameIdentities(t, "the in-place image update", before, identities(t, ps))

	out := runHelm(t, helm, "uninstall", releaseName, "--namespace", releaseNamespace, "--wait", "--timeout", waitTimeout.String())
	t.Logf("helm uninstall:\n%s", out)
	eventually(t, "the operator's pods are gone", func(ctx context.Context) error {
		var list corev1.PodList
		if err := suite.client.List(ctx, &list, client.InNamespace(releaseNamespace)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d pods left", len(list.Items))
		}
		return nil
	})
	if err := suite.client.Get(t.Context(), client.ObjectKeyFromObject(ps), &podsetv1alpha1.PodSet{}); err != nil {
		t.Fatalf("after helm uninstall, PodSet %s: %v", ps.Name, err)
	}
	checkSameIdentities(t, "helm uninstall", before, identities(t, ps))
}

// operatorImage is one build of the operator's image on the node.
type operatorImage struct{ tag, digest string }

// buildOperatorImage builds the operator's image for the node's platform
// with hack/image, as `make image` does, and imports it into the node's
// containerd under its tag and its digest.
func buildOperatorImage(t *testing.T, version string) operatorImage {
	t.Helper()
	dir := t.TempDir()
	out, err := goCommand("run", "./hack/image", "-version", version, "-repo", operatorRepo,
		"-platforms", "linux/"+runtime.GOARCH, "-out", dir)
	if err != nil {
		t.Fatalf("hack/image: %v\n%s", err, out)
	}
	ref := lastLine(string(out))
	_, digest, ok := strings.Cut(ref, "@")
	if !ok {
		t.Fatalf("hack/image printed %q, want repository:tag@digest", ref)
	}
	archive := filepath.Join(dir, "podset-operator_"+version+"_oci.tar")
	ctr(t, "images", "import", archive)
	// The kubelet asks for repository:tag@digest by its digest.
	ctr(t, "images", "tag", "--force", operatorRepo+":"+version, operatorRepo+"@"+digest)
	t.Logf("built and imported %s", ref)
	return operatorImage{tag: version, digest: digest}
}

// ctr runs containerd's client on the node's containerd (hack/node.sh's
// socket), in the kubelet's namespace.
func ctr(t *testing.T, args ...string) {
	t.Helper()
	sock := filepath.Join(suite.root, "bin", "node", cmp.Or(os.Getenv("CLUSTER_NAME"), "podset-node"), "containerd", "containerd.sock")
	cmd := exec.CommandContext(t.Context(), filepath.Join(os.Getenv("CONTAINERD_DIR"), "ctr"),
		append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// pauseSuiteOperator stops the suite's operator until the test ends, so
// that only the operator the test installs reconciles.
func pauseSuiteOperator(t *testing.T) {
	t.Helper()
	suite.stopOperator(syscall.SIGTERM)
	suite.stopOperator = func(syscall.Signal) {}
	t.Cleanup(func() {
		stop, err := startOperator(suite.operatorDir, true)
		if err != nil {
			t.Errorf("restarting the suite's operator: %v", err)
			return
		}
		suite.stopOperator = stop
	})
}

// adoptCRDForHelm marks the CRD, which the suite applied before the chart,
// as the release's, as Helm requires before it takes an object over: the
// chart then applies and upgrades it, and its uninstall keeps it.
func adoptCRDForHelm(t *testing.T) {
	t.Helper()
	crd := "customresourcedefinition/podsets.podset.dev"
	kubectl(t, "annotate", "--overwrite", crd, "meta.helm.sh/release-name="+releaseName, "meta.helm.sh/release-namespace="+releaseNamespace)
	kubectl(t, "label", "--overwrite", crd, "app.kubernetes.io/managed-by=Helm")
}

// forwardAPIServer makes the API server, which listens on 127.0.0.1 only,
// reachable from the node's pods: it forwards connections to the node's
// own address (its bridge, the pods' gateway) to the API server until the
// test ends, and returns that address and port.
func forwardAPIServer(t *testing.T) (host, port string) {
	t.Helper()
	apiServer := apiServerAddress(t)
	var node corev1.Node
	if err := suite.client.Get(t.Context(), client.ObjectKey{Name: nodeName}, &node); err != nil {
		t.Fatal(err)
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			host = a.Address
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening on the node's address %q: %v", host, err)
	}
	var conns sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
		conns.Wait()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer func() { _ = in.Close() }()
				out, err := net.Dial("tcp", apiServer)
				if err != nil {
					return
				}
				defer func() { _ = out.Close() }()
				go func() {
					<-done
					_ = in.Close()
					_ = out.Close()
				}()
				go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return host, port
}

// waitOperatorRunning waits until the operator's Deployment has rolled out
// image and its two replicas run it on the real node.
func waitOperatorRunning(t *testing.T, image operatorImage) {
	t.Helper()
	want := operatorRepo + ":" + image.tag + "@" + image.digest
	eventually(t, "2 operator pods run "+want+" on the real node", func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: releaseName}, &d); err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
			return fmt.Errorf("the Deployment runs %s", got)
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 2 || d.Status.AvailableReplicas != 2 || d.Status.Replicas != 2 {
			return fmt.Errorf("Deployment status %+v", d.Status)
		}
		running, err := operatorPods(ctx)
		if err != nil {
			return err
		}
		if len(running) != 2 {
			return fmt.Errorf("operator pods %v", slices.Sorted(maps.Keys(running)))
		}
		for name, p := range running {
			if p.Spec.NodeName != nodeName || p.Spec.Containers[0].Image != want {
				return fmt.Errorf("pod %s runs %s on %q", name, p.Spec.Containers[0].Image, p.Spec.NodeName)
			}
		}
		return nil
	})
}

// operatorPods are the operator's pods that run and are not going.
func operatorPods(ctx context.Context) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := suite.client.List(ctx, &list, client.InNamespace(releaseNamespace), client.MatchingLabels{"app.kubernetes.io/name": "podset-operator"}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out[p.Name] = &list.Items[i]
		}
	}
	return out, nil
}

// waitLeader waits until a running operator pod other than not holds the
// leader-election Lease, and returns its name.
func waitLeader(t *testing.T, not string) string {
	t.Helper()
	var leader string
	eventually(t, "a running operator pod other than "+cmp.Or(not, "none")+" leads", func(ctx context.Context) error {
		var lease coordinationv1.Lease
		if err := suite.client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: leaseName}, &lease); err != nil {
			return err
		}
		// controller-runtime's identity: <pod name>_<uuid>.
		holder, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
		running, err := operatorPods(ctx)
		if err != nil {
			return err
		}
		if _, ok := running[holder]; !ok || holder == not {
			return fmt.Errorf("the Lease is held by %q; running pods %v", holder, slices.Sorted(maps.Keys(running)))
		}
		leader = holder
		return nil
	})
	return leader
}

// checkSameIdentities fails unless every pod kept its UID, IP and node.
func checkSameIdentities(t *testing.T, what string, before, after map[string]identity) {
	t.Helper()
	if !maps.Equal(before, after) {
		t.Errorf("%s changed the PodSet's pods: before %v, after %v", what, before, after)
	}
}

// runHelm runs helm against the node's cluster with its cache,
// configuration and data in a temporary folder, and returns its output.
func runHelm(t *testing.T, helm string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), helm, append(args, "--kubeconfig", suite.kubeconfig)...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		out, _ := execKubectl("get", "deployments,replicasets,pods,events", "-n", releaseNamespace, "-o", "wide")
		t.Fatalf("helm %s: %v\n%s\n%s", strings.Join(args, " "), err, output.Bytes(), out)
	}
	return output.String()
}
