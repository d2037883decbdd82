package main

import (
	"context"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podset-dev/podset-operator/test/kruise"
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
type kruiseContender struct{ b *bench }

func (k *kruiseContender) name() string { return "kruise" }
func (k *kruiseContender) kinds() kinds { return kindPods }

// start starts kruise-manager for the session (kruise.Start).
func (k *kruiseContender) start(ctx context.Context, namespaces []string) (func() error, error) {
	m, err := kruise.Start(ctx, kruise.Options{
		Dir: kruise.Dir(), Kubeconfig: k.b.c.kubeconfig, Client: k.b.c.cl,
		StateDir: filepath.Join(k.b.logDir, "kruise"), Log: logPath(k.b.logDir, "kruise-manager"),
		FieldManager: benchFieldManager, Namespaces: namespaces,
	})
	if err != nil {
		return nil, err
	}
	k.b.c.ctrlPID.Store(int32(m.PID()))
	return m.Stop, nil
}

// create makes one CloneSet per set of the benchmark's hardened template.
func (k *kruiseContender) create(ctx context.Context, j job) error {
	return parallel(len(j.sets), 8, func(i int) error {
		set := j.sets[i]
		tmpl := hardenedTemplate(template(set, 1))
		t, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
		if err != nil {
			return err
		}
		cs := kruise.CloneSet(j.ns, set)
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
	return scaleSets(ctx, k.b.c.cl, j, to, kruise.CloneSet("", ""))
}

// changeImage changes the CloneSets' image and nothing else (a JSON patch:
// the template its webhook defaulted stays as it is).
func (k *kruiseContender) changeImage(ctx context.Context, j job) error {
	return parallel(len(j.sets), 8, func(i int) error {
		return k.b.c.cl.Patch(ctx, kruise.CloneSet(j.ns, j.sets[i]), client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"`+newImage+`"}]`)))
	})
}
