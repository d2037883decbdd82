package main

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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/test/testenv"
)

// kruiseContender is OpenKruise's kruise-manager (make kruise builds it
// into $KRUISE_DIR; hack/kruise.sh): one CloneSet per set, updateStrategy
// InPlaceIfPossible with maxUnavailable 100%. Its pods carry its readiness
// gate InPlaceUpdateReady, which it turns False before an in-place update
// and True after, as the operator's default policy does with its own: the
// peer that pays the same gate. It runs as a subprocess per scenario, as
// the operator does, with its client's QPS limits lifted (as the built-in
// controllers' are), leader election off, every listener on 127.0.0.1,
// and the feature gates KruiseDaemon (no kruise-daemon runs on kwok's
// nodes) and PodWebhook (no webhook on every pod create) off. It takes
// part only when KRUISE_DIR is set (make bench sets it). It cannot roll
// out (the rollout scenario's change is not in place).
type kruiseContender struct {
	b    *bench
	cmd  *exec.Cmd
	done chan error
	// namespaces are the session's; webhooks the webhook configurations
	// created for it.
	namespaces []string
	webhooks   []*unstructured.Unstructured
}

// kruiseDir is the folder of kruise-manager and its manifests, from
// KRUISE_DIR; empty when the kruise contender does not take part.
func kruiseDir() string { return os.Getenv("KRUISE_DIR") }

// cloneSetGVK is OpenKruise's CloneSet.
var cloneSetGVK = schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "CloneSet"}

func (k *kruiseContender) name() string { return "kruise" }
func (k *kruiseContender) kinds() kinds { return kindPods }

// start installs OpenKruise's CRDs and webhook configurations, then
// starts kruise-manager and returns once its webhook server answers and
// its CloneSet controller runs.
func (k *kruiseContender) start(ctx context.Context, namespaces []string) (func() error, error) {
	dir := kruiseDir()
	k.namespaces = namespaces
	if err := k.install(ctx, dir); err != nil {
		_ = k.stop()
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
	state := filepath.Join(k.b.logDir, "kruise")
	if err := os.MkdirAll(filepath.Join(state, "certs"), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath(k.b.logDir, "kruise-manager"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		logFile.Close()
		return nil, err
	}
	cmd := exec.Command(filepath.Join(dir, "manager"),
		"--enable-leader-election=false",
		"--metrics-addr=127.0.0.1:"+strconv.Itoa(metrics),
		"--health-probe-addr=127.0.0.1:"+strconv.Itoa(health),
		"--enable-pprof=false",
		"--protection-log-path="+state,
		"--feature-gates=KruiseDaemon=false,PodWebhook=false",
		"--rest-config-qps=10000", "--rest-config-burst=20000",
		"--v=2")
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+k.b.c.kubeconfig,
		"WEBHOOK_HOST=127.0.0.1", "WEBHOOK_BIND_HOST=127.0.0.1",
		"WEBHOOK_PORT="+strconv.Itoa(webhook),
		"WEBHOOK_CERT_DIR="+filepath.Join(state, "certs"),
		"POD_NAMESPACE=kruise-system")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting kruise-manager: %w", err)
	}
	k.cmd, k.done = cmd, make(chan error, 1)
	go func() { k.done <- cmd.Wait(); logFile.Close() }()
	k.b.c.ctrlPID.Store(int32(cmd.Process.Pid))
	if err := k.waitReady(ctx, health, logFile.Name(), logStart); err != nil {
		_ = k.stop()
		return nil, err
	}
	return k.stop, nil
}

// waitReady waits up to two minutes for kruise-manager's readyz (its
// webhook server up with its certificate) and its CloneSet workers.
func (k *kruiseContender) waitReady(ctx context.Context, health int, log string, from int64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-k.done:
			k.done <- err
			return fmt.Errorf("kruise-manager exited (%v); its log: %s", err, log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			continue
		}
		resp.Body.Close()
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

// stop deletes the session's CloneSets while kruise-manager still answers
// its webhooks, stops it (SIGTERM, then a kill after 30 seconds) and
// deletes its webhook configurations: with failurePolicy Fail and no
// server behind them, they would refuse every deletion of a namespace,
// Deployment, ReplicaSet or StatefulSet in the cluster afterwards.
func (k *kruiseContender) stop() error {
	if k.cmd == nil && len(k.webhooks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, ns := range k.namespaces {
		err := k.b.c.cl.DeleteAllOf(ctx, k.cloneSet(ns, ""), client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting the CloneSets of %s: %w", ns, err))
		}
	}
	if cmd := k.cmd; cmd != nil {
		k.cmd = nil
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-k.done
		}
	}
	for _, w := range k.webhooks {
		if err := k.b.c.cl.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
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
// and exits when they are missing. stop deletes them again.
func (k *kruiseContender) install(ctx context.Context, dir string) error {
	cl := k.b.c.cl
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
			if err := cl.Patch(ctx, obj, client.Apply, client.FieldOwner(benchFieldManager), client.ForceOwnership); err != nil {
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
	defer os.RemoveAll(work)
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
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
				return nil
			}
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

func (k *kruiseContender) prepare(context.Context, job) error { return nil }

// create makes one CloneSet per set of the benchmark's hardened template.
func (k *kruiseContender) create(ctx context.Context, j job) error {
	return parallel(len(j.sets), 8, func(i int) error {
		set := j.sets[i]
		tmpl := template(set, 1)
		tmpl.Spec = hardenedSpec(tmpl.Spec)
		t, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
		if err != nil {
			return err
		}
		cs := k.cloneSet(j.ns, set)
		cs.Object["spec"] = map[string]any{
			"replicas": int64(j.n),
			"selector": map[string]any{"matchLabels": map[string]any{setLabel: set}},
			"template": t,
			"updateStrategy": map[string]any{
				"type":           "InPlaceIfPossible",
				"maxUnavailable": "100%",
			},
		}
		return k.b.c.cl.Create(ctx, cs)
	})
}

func (k *kruiseContender) ready(s *state, j job) bool { return podsReady(s, j, "", true) }

func (k *kruiseContender) scale(ctx context.Context, j job, to int32) error {
	return parallel(len(j.sets), 8, func(i int) error {
		return k.b.c.cl.Patch(ctx, k.cloneSet(j.ns, j.sets[i]), client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, to))))
	})
}

func (k *kruiseContender) canRollout() bool                   { return false }
func (k *kruiseContender) rollout(context.Context, job) error { return nil }
func (k *kruiseContender) rolledOut(*state, job) bool         { return false }

// changeImage changes the CloneSets' image and nothing else (a JSON patch:
// the template its webhook defaulted stays as it is).
func (k *kruiseContender) changeImage(ctx context.Context, j job) error {
	return parallel(len(j.sets), 8, func(i int) error {
		return k.b.c.cl.Patch(ctx, k.cloneSet(j.ns, j.sets[i]), client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"`+newImage+`"}]`)))
	})
}

// cloneSet is a CloneSet's reference, to create, patch or delete.
func (k *kruiseContender) cloneSet(ns, name string) *unstructured.Unstructured {
	cs := &unstructured.Unstructured{}
	cs.SetGroupVersionKind(cloneSetGVK)
	cs.SetNamespace(ns)
	cs.SetName(name)
	return cs
}
