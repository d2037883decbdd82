// Package kruise runs OpenKruise's kruise-manager beside a cluster, for
// the benchmarks that measure the operator against its CloneSet: the kwok
// benchmark (test/bench) and the real node's (test/node). make kruise
// builds kruise-manager and copies its manifests into KRUISE_DIR
// (hack/kruise.sh).
package kruise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// Dir is the folder of kruise-manager and its manifests, from KRUISE_DIR;
// empty when OpenKruise does not take part.
func Dir() string { return os.Getenv("KRUISE_DIR") }

// CloneSetGVK is OpenKruise's CloneSet.
var CloneSetGVK = schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "CloneSet"}

// CloneSet is a CloneSet's reference, to create, patch or delete.
func CloneSet(ns, name string) *unstructured.Unstructured {
	cs := &unstructured.Unstructured{}
	cs.SetGroupVersionKind(CloneSetGVK)
	cs.SetNamespace(ns)
	cs.SetName(name)
	return cs
}

// Options say where kruise-manager runs.
type Options struct {
	// Dir holds kruise-manager and its manifests (Dir()).
	Dir string
	// Kubeconfig reaches the cluster's API server; Client is a cluster
	// admin of it.
	Kubeconfig string
	Client     client.Client
	// StateDir holds its certificates; Log is its log file.
	StateDir, Log string
	// FieldManager applies its CRDs.
	FieldManager string
	// Namespaces are those whose CloneSets Stop deletes.
	Namespaces []string
}

// Manager is a running kruise-manager: one per session, as a subprocess
// with its client's QPS limits lifted (as the built-in controllers' are),
// leader election off, every listener on 127.0.0.1, and the feature gates
// KruiseDaemon (no kruise-daemon runs beside it) and PodWebhook (no
// webhook on every pod create) off.
type Manager struct {
	opts Options
	cmd  *exec.Cmd
	// exited is closed once kruise-manager has exited, with its exit
	// status in exitErr.
	exited   chan struct{}
	exitErr  error
	webhooks []*unstructured.Unstructured
}

// Start installs OpenKruise's CRDs and webhook configurations, then
// starts kruise-manager and returns once its webhook server answers and
// its CloneSet controller runs.
func Start(ctx context.Context, opts Options) (*Manager, error) {
	k := &Manager{opts: opts}
	if err := k.install(ctx, opts.Dir); err != nil {
		_ = k.Stop()
		return nil, fmt.Errorf("installing OpenKruise's CRDs and webhook configurations: %w", err)
	}
	ports := make([]int, 3)
	for i := range ports {
		p, err := testenv.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	webhook, metrics, health := ports[0], ports[1], ports[2]
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "certs"), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(opts.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	cmd := exec.Command(filepath.Join(opts.Dir, "manager"),
		"--enable-leader-election=false",
		"--metrics-addr=127.0.0.1:"+strconv.Itoa(metrics),
		"--health-probe-addr=127.0.0.1:"+strconv.Itoa(health),
		"--enable-pprof=false",
		"--protection-log-path="+opts.StateDir,
		"--feature-gates=KruiseDaemon=false,PodWebhook=false",
		"--rest-config-qps=10000", "--rest-config-burst=20000",
		"--v=2")
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+opts.Kubeconfig,
		"WEBHOOK_HOST=127.0.0.1", "WEBHOOK_BIND_HOST=127.0.0.1",
		"WEBHOOK_PORT="+strconv.Itoa(webhook),
		"WEBHOOK_CERT_DIR="+filepath.Join(opts.StateDir, "certs"),
		"POD_NAMESPACE=kruise-system")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting kruise-manager: %w", err)
	}
	k.cmd, k.exited = cmd, make(chan struct{})
	go func() {
		k.exitErr = cmd.Wait()
		_ = logFile.Close() // the manager wrote it through its own descriptor
		close(k.exited)
	}()
	if err := k.waitReady(ctx, health, logFile.Name(), logStart); err != nil {
		_ = k.Stop()
		return nil, err
	}
	return k, nil
}

// PID is kruise-manager's process.
func (k *Manager) PID() int { return k.cmd.Process.Pid }

// waitReady waits up to two minutes for kruise-manager's readyz (its
// webhook server up with its certificate) and its CloneSet workers.
func (k *Manager) waitReady(ctx context.Context, health int, log string, from int64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-k.exited:
			return fmt.Errorf("kruise-manager exited (%v); its log: %s", k.exitErr, log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK && cloneSetWorkers(log, from) {
			return nil
		}
	}
	return fmt.Errorf("kruise-manager not ready within two minutes; its log: %s", log)
}

// cloneSetWorkers reports whether kruise-manager's log, from offset on,
// says its CloneSet controller started its workers.
func cloneSetWorkers(log string, offset int64) bool {
	text, err := os.ReadFile(log)
	if err != nil || int64(len(text)) < offset {
		return false
	}
	for _, line := range strings.Split(string(text[offset:]), "\n") {
		if strings.Contains(line, `"Starting workers"`) && strings.Contains(line, `"cloneset-controller"`) {
			return true
		}
	}
	return false
}

// Stop deletes the session's CloneSets while kruise-manager still answers
// its webhooks, stops it (SIGTERM, then a kill after 30 seconds) and
// deletes its webhook configurations: with failurePolicy Fail and no
// server behind them, they would refuse every deletion of a namespace,
// Deployment, ReplicaSet or StatefulSet in the cluster afterwards.
func (k *Manager) Stop() error {
	if k.cmd == nil && len(k.webhooks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, ns := range k.opts.Namespaces {
		err := k.opts.Client.DeleteAllOf(ctx, CloneSet(ns, ""), client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the CloneSets of %s: %w", ns, err))
		}
	}
	if cmd := k.cmd; cmd != nil {
		k.cmd = nil
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.exited: // its exit status after SIGTERM says nothing
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-k.exited
		}
	}
	for _, w := range k.webhooks {
		if err := k.opts.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", w.GetKind(), w.GetName(), err))
		}
	}
	k.webhooks = nil
	return errors.Join(errs...)
}

// install applies OpenKruise's CRDs (server-side: some are too large for a
// client-side apply's annotation) and waits for them, and creates its two
// webhook configurations as its release installs them (config/webhook
// with the name prefix kruise-): kruise-manager only rewrites them (a URL
// on WEBHOOK_HOST, its CA, and without the webhooks of disabled features)
// and exits when they are missing. Stop deletes them again.
func (k *Manager) install(ctx context.Context, dir string) error {
	cl := k.opts.Client
	crds, err := filepath.Glob(filepath.Join(dir, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRDs in %s/config/crd/bases (run make kruise): %v", dir, err)
	}
	var names []string
	for _, file := range crds {
		objs, err := decodeFile(file)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			names = append(names, obj.GetName())
			if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(k.opts.FieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying CRD %s: %w", obj.GetName(), err)
			}
		}
	}
	for _, name := range names {
		if err := waitEstablished(ctx, cl, name); err != nil {
			return err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kruise-system"}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	work, err := os.MkdirTemp("", "kruise-webhooks-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	base, err := filepath.Rel(work, filepath.Join(dir, "config", "webhook"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "kustomization.yaml"),
		[]byte("namePrefix: kruise-\nresources:\n- "+base+"\n"), 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, filepath.Join(os.Getenv("CONTROLPLANE"), "kubectl"), "kustomize", work).Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize of OpenKruise's config/webhook: %w", err)
	}
	objs, err := decodeAll(string(out))
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if !strings.HasSuffix(obj.GetKind(), "WebhookConfiguration") {
			continue
		}
		// One left by an interrupted run is taken as it is: kruise-manager
		// rewrites it.
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		k.webhooks = append(k.webhooks, obj)
	}
	return nil
}

// waitEstablished waits up to a minute for a CRD to be Established.
func waitEstablished(ctx context.Context, cl client.Client, name string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		crd, err := testenv.GetCRD(ctx, cl, name)
		if err != nil {
			return err
		}
		if testenv.Established(crd) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not Established within a minute", name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// decodeFile decodes the objects of a YAML file.
func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeAll(string(text))
}

// decodeAll decodes the objects of a multi-document YAML text.
func decodeAll(text string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}
