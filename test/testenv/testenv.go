package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/controller"
)

// Env is a running API server with the project's CRD and policies.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a cluster-admin client that reads straight from the API
	// server, with the core and PodSet types registered in Scheme.
	Client client.Client
	// Scheme has the core Kubernetes types and the PodSet API.
	Scheme *runtime.Scheme

	env *envtest.Environment
	// restarted is the kube-apiserver started by RestartAPIServer, if any.
	restarted *exec.Cmd
	// stopKubelet stops the kubelets' reaction to drains (reactToDrains).
	stopKubelet context.CancelFunc
}

// NewClient is a client of the cluster of a kubeconfig file, with
// NewScheme's types.
func NewClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// NewClientset is a client-go clientset of the cluster of a kubeconfig
// file: for watches and the API server's own endpoints (/metrics).
func NewClientset(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	return kubernetes.NewForConfig(cfg)
}

// Start starts kube-apiserver and etcd, installs config/crd and
// config/policy, and waits until the policies are enforced.
func Start() (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	// The operators under test log through controller-runtime; that is noise
	// in test output unless asked for.
	if os.Getenv("TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or export the path `make envtest-assets` prints")
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	e := &Env{Config: cfg, Scheme: scheme, env: env}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if err := e.installPolicies(filepath.Join(root, "config", "policy")); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stopKubelet = cancel
	if err := reactToDrains(ctx, cfg); err != nil {
		cancel()
		return nil, errors.Join(err, env.Stop())
	}
	return e, nil
}

// RestartAPIServer crashes kube-apiserver (SIGKILL: no graceful shutdown,
// connections just drop), waits, and starts it again with the same command
// line: the same address, certificates and etcd, as after a crash or an
// upgrade of the control plane. It returns once the new one answers.
func (e *Env) RestartAPIServer(down time.Duration) error {
	port := "--secure-port=" + e.env.ControlPlane.GetAPIServer().SecureServing.Port
	pids, cmdlines, err := Processes("kube-apiserver", func(args []string) bool { return slices.Contains(args, port) })
	if err == nil && len(pids) == 0 {
		err = fmt.Errorf("no kube-apiserver process with %s", port)
	}
	if err != nil {
		return err
	}
	pid, args := pids[0], cmdlines[0]
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := proc.Kill(); err != nil {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	if e.restarted != nil {
		_ = e.restarted.Wait()
	}
	time.Sleep(down)
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	e.restarted = cmd
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if err := e.Client.List(ctx, &corev1.NamespaceList{}, client.Limit(1)); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return fmt.Errorf("kube-apiserver did not come back: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Main is a test package's TestMain: it starts the environment into *env,
// runs the tests and stops it, and returns the exit code.
func Main(m *testing.M, env **Env) int {
	var err error
	if *env, err = Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := (*env).Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error {
	e.stopKubelet()
	if e.restarted != nil {
		_ = e.restarted.Process.Kill()
		_ = e.restarted.Wait()
	}
	return e.env.Stop()
}

// installPolicies applies the admission policies and waits until the API
// server enforces each: a policy is enforced only once the API server's
// informers have seen it, a moment after it is created.
func (e *Env) installPolicies(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, file := range []string{"hardening.yaml", "pod-validity.yaml", "replace.yaml"} {
		objs, err := ReadManifests(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := e.Client.Create(ctx, obj); err != nil {
				return fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	probeNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "testenv-policy-probe"}}
	if err := e.Client.Create(ctx, probeNS); err != nil {
		return err
	}
	// One PodSet each policy refuses: a privileged container, a port out of
	// range.
	probes := map[string]func(*corev1.Container){
		"podset-hardening.podset.dev":    func(c *corev1.Container) { c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)} },
		"podset-pod-validity.podset.dev": func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 70000}} },
	}
	for policy, mutate := range probes {
		probe := &podsetv1alpha1.PodSet{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: probeNS.Name},
			Spec: podsetv1alpha1.PodSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
		}
		mutate(&probe.Spec.Template.Spec.Containers[0])
		for {
			err := e.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), policy) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the policy %s was not enforced within a minute (last answer: %v)", policy, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return e.Client.Delete(ctx, probeNS)
}

// ReadManifests decodes every object of a multi-document YAML file.
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// RepoRoot is the directory of the project's go.mod, found from the working
// directory upwards (go test runs each package in its own directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Processes are the running processes whose executable is named command
// and whose arguments (the command line after the executable) match:
// their PIDs and whole command lines, in /proc's order.
func Processes(command string, match func(args []string) bool) (pids []int, cmdlines [][]string, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if filepath.Base(args[0]) == command && match(args[1:]) {
			pids, cmdlines = append(pids, pid), append(cmdlines, args)
		}
	}
	return pids, cmdlines, nil
}
