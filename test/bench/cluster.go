package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
	"github.com/podset-dev/podset-operator/internal/localcluster"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// clusterName is the only cluster the benchmark starts, uses and deletes.
const clusterName = "podset-bench"

// cluster is the podset-bench kwok cluster and the admin clients to it.
type cluster struct {
	root         string // repository root
	controlplane string // folder of kube-apiserver, etcd, ... kubectl
	kwokDir      string // folder of kwok and kwokctl
	kubeconfig   string
	existed      bool // the cluster was there before this run
	nodes        int

	cfg    *rest.Config
	cs     kubernetes.Interface
	cl     client.Client
	scheme *runtime.Scheme
	runID  string
	procs  controlPlane // its kube-apiserver and etcd processes (cpu.go)
	// ctrlPID is the process of the contender's controller while it runs
	// (cpu.go), 0 for none.
	ctrlPID atomic.Int32
}

// newCluster finds the binaries: $CONTROLPLANE and $KWOK_DIR as the
// Makefile sets them, else the Makefile's default folders under bin/.
func newCluster() (*cluster, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &cluster{
		root:         root,
		controlplane: os.Getenv("CONTROLPLANE"),
		kwokDir:      os.Getenv("KWOK_DIR"),
		runID:        strconv.FormatInt(time.Now().Unix()%1e6, 36),
	}
	controlplane, kwok, err := testenv.ToolDirs(root)
	if err != nil {
		return nil, err
	}
	c.controlplane = cmp.Or(c.controlplane, controlplane)
	c.kwokDir = cmp.Or(c.kwokDir, kwok)
	for _, f := range []string{filepath.Join(c.controlplane, "kube-apiserver"), filepath.Join(c.kwokDir, "kwokctl")} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make controlplane` (or set CONTROLPLANE and KWOK_DIR): %w", f, err)
		}
	}
	return c, nil
}

// kcmControllers are the controllers of the benchmark cluster's
// kube-controller-manager: ReplicaSet, Deployment and StatefulSet, the
// garbage collector (a deleted PodSet's or ReplicaSet's pods), the
// namespace controller (the run's namespaces are deleted), the service
// account controller (a namespace's default ServiceAccount, which a pod
// needs to be admitted) and the node lifecycle controller (it lifts the
// not-ready taint the API server puts on every new node, so pods can be
// scheduled).
var kcmControllers = []string{"deployment-controller", "replicaset-controller", "statefulset-controller", "garbage-collector-controller",
	"namespace-controller", "serviceaccount-controller", "node-lifecycle-controller"}

// local is the benchmark's kwok cluster with the given number of nodes.
func (c *cluster) local(nodes int) localcluster.Cluster {
	return localcluster.Cluster{
		Name:             clusterName,
		Root:             c.root,
		ControlPlane:     c.controlplane,
		Kwok:             c.kwokDir,
		Nodes:            nodes,
		DisableQPSLimits: true,
		// The benchmark's pods have a grace period of 0 (see template):
		// kwok's pod-delete stage has nothing to do but harm.
		WithoutPodDelete: true,
		// The kube-controller-manager runs the controllers of the built-in
		// contenders and what the benchmark's namespaces need, nothing
		// else: its CPU in a measured window is theirs (cpu.go).
		Controllers: kcmControllers,
	}
}

// up starts or reuses the cluster with the given number of nodes and
// connects to it.
func (c *cluster) up(ctx context.Context, nodes int) error {
	local := c.local(nodes)
	if c.cfg == nil {
		exists, err := local.Exists(ctx)
		if err != nil {
			return err
		}
		c.existed = exists
	}
	var err error
	c.kubeconfig, err = local.Up(ctx)
	if err != nil {
		return err
	}
	c.nodes = nodes
	if c.cfg != nil {
		return nil
	}
	// Load the kubeconfig the way main.go does (ctrl.GetConfig): it turns
	// client-side rate limiting off (QPS -1), relying on the API server's
	// priority and fairness.
	if err := os.Setenv("KUBECONFIG", c.kubeconfig); err != nil {
		return err
	}
	if c.cfg, err = ctrl.GetConfig(); err != nil {
		return err
	}
	if c.scheme, err = controller.NewScheme(); err != nil {
		return err
	}
	if c.cs, err = kubernetes.NewForConfig(c.cfg); err != nil {
		return err
	}
	c.cl, err = client.New(c.cfg, client.Options{Scheme: c.scheme})
	return err
}

// down deletes the cluster.
func (c *cluster) down(ctx context.Context) error {
	return c.local(0).Down(ctx)
}

// installCRD applies the PodSet CRD of config/crd and waits until it is
// served.
func (c *cluster) installCRD(ctx context.Context) error {
	objs, err := testenv.ReadManifests(filepath.Join(c.root, "config", "crd", "bases", "podset.dev_podsets.yaml"))
	if err != nil {
		return err
	}
	for _, obj := range objs {
		obj.SetManagedFields(nil)
		if err := c.cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(benchFieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("installing the PodSet CRD: %w", err)
		}
	}
	err = testenv.Poll(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		if err := testenv.CRDEstablished(ctx, c.cl, "podsets.podset.dev"); err != nil {
			return err
		}
		// A fresh client, so that its REST mapper discovers the new type.
		cl, err := client.New(c.cfg, client.Options{Scheme: c.scheme})
		if err != nil {
			return err
		}
		c.cl = cl
		return c.cl.List(ctx, &podsetv1alpha1.PodSetList{}, client.Limit(1))
	})
	if err != nil {
		return fmt.Errorf("the PodSet CRD is not served: %w", err)
	}
	return nil
}

// namespace creates a fresh namespace for one contender's run. It enforces
// the Pod Security "restricted" profile, as a hardened cluster would.
func (c *cluster) namespace(ctx context.Context, name string) (string, error) {
	return testenv.NewNamespace(ctx, c.cl, "b"+c.runID+"-"+name, map[string]string{
		runLabel:                             c.runID,
		"pod-security.kubernetes.io/enforce": "restricted",
	})
}

// empty removes everything a run made in its namespaces: the workload
// objects, then every pod at once (grace period 0), and waits until the
// observer has seen the last pod go.
func (c *cluster) empty(ctx context.Context, obs *observer, namespaces ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for _, ns := range namespaces {
		for _, obj := range []client.Object{&podsetv1alpha1.PodSet{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.ReplicaSet{}} {
			if err := c.cl.DeleteAllOf(ctx, obj, client.InNamespace(ns), bg); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("cleaning up %s: %w", ns, err)
			}
		}
		// Deleting tens of thousands of pods can outlast the API server's
		// request timeout; it goes on deleting, and a retry finds fewer.
		for attempt := 1; ; attempt++ {
			err := c.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)}, metav1.ListOptions{})
			if err == nil {
				break
			}
			if attempt == 5 || ctx.Err() != nil {
				return fmt.Errorf("cleaning up the pods of %s: %w", ns, err)
			}
			logf("deleting the pods of %s: %v; retrying", ns, err)
		}
	}
	if obs != nil {
		return obs.waitFor(ctx, "pods gone", func(s *state) bool { return len(s.pods) == 0 })
	}
	return nil
}

// deleteNamespaces deletes namespaces and waits until they are gone (the
// namespace controller takes about five seconds even for an empty one).
func (c *cluster) deleteNamespaces(ctx context.Context, namespaces ...string) error {
	for _, ns := range namespaces {
		if err := c.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, ns := range namespaces {
		if err := c.waitNamespaceGone(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// waitNamespaceGone watches a namespace until it is deleted.
func (c *cluster) waitNamespaceGone(ctx context.Context, name string) error {
	for {
		list, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		w, err := c.cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: list.ResourceVersion,
		})
		if err != nil {
			return err
		}
		gone := false
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				gone = true
				break
			}
		}
		w.Stop()
		if gone {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("namespace %s is still there: %w", name, ctx.Err())
		}
	}
}

// removeLeftovers deletes the namespaces of earlier, interrupted runs.
func (c *cluster) removeLeftovers(ctx context.Context) error {
	list := &corev1.NamespaceList{}
	if err := c.cl.List(ctx, list, client.HasLabels{runLabel}); err != nil {
		return err
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	if len(names) == 0 {
		return nil
	}
	logf("removing %d namespaces left by earlier runs", len(names))
	obs, err := newObserver(ctx, c, names, kindPods)
	if err != nil {
		return err
	}
	defer obs.stop()
	if err := c.empty(ctx, obs, names...); err != nil {
		return err
	}
	return c.deleteNamespaces(ctx, names...)
}

func ptrTo[T any](v T) *T { return &v }

var errTimeout = errors.New("timed out")
