package reliability_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/fixture"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// permission is one RBAC grant: an API group, a resource (with
// subresource) and a verb.
type permission struct{ group, resource, verb string }

func (p permission) String() string { return fmt.Sprintf("%s %s/%s", p.verb, p.group, p.resource) }

// permissionRecorder records the permission each request needs, and which
// were refused.
type permissionRecorder struct {
	mu      sync.Mutex
	used    map[permission]bool
	refused map[permission]bool
}

func (r *permissionRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return testenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		perms := needed(req, resp)
		r.mu.Lock()
		for _, p := range perms {
			r.used[p] = true
			if resp.StatusCode == http.StatusForbidden {
				r.refused[p] = true
			}
		}
		r.mu.Unlock()
		return resp, err
	})
}

// needed maps a request to the RBAC permissions it takes: a server-side
// apply that creates its object (201) needs create as well as patch.
func needed(req *http.Request, resp *http.Response) []permission {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	group := ""
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return nil // discovery, version
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return nil
	}
	res, named := parts[0], len(parts) > 1
	if len(parts) > 2 {
		res += "/" + parts[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[req.Method]
	switch {
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
		verb = "watch"
	case req.Method == http.MethodGet && named:
		verb = "get"
	case req.Method == http.MethodGet:
		verb = "list"
	}
	perms := []permission{{group, res, verb}}
	if req.Method == http.MethodPatch && resp.StatusCode == http.StatusCreated {
		perms = append(perms, permission{group, res, "create"})
	}
	return perms
}

// shippedRole reads the ClusterRole that `make manifests` generates.
func shippedRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.ReadManifests(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("config/rbac/role.yaml: %v (%d objects)", err, len(objs))
	}
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, role); err != nil {
		t.Fatal(err)
	}
	return role
}

// bindShippedRole binds the shipped ClusterRole, as its own copy, to a
// service account of ns, and returns the role and the user the operator
// impersonates.
func bindShippedRole(t *testing.T, ns string) (*rbacv1.ClusterRole, string) {
	t.Helper()
	role := shippedRole(t)
	role.Name = "podset-operator-" + ns
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "podset-operator", Namespace: ns}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	for _, o := range []client.Object{role, sa, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	return role, "system:serviceaccount:" + ns + ":" + sa.Name
}

// exerciseBudget drives the PodDisruptionBudget of spec.disruptionBudget:
// created, updated and deleted with the field, and its name found held by
// one the PodSet does not control (asked of the API server with a get).
func exerciseBudget(t *testing.T, ns string, key types.NamespacedName) {
	t.Helper()
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	})
	waitForBudget(t, key, func(pdb *policyv1.PodDisruptionBudget) bool { return pdb.Spec.MaxUnavailable != nil })
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1))}
	})
	waitForBudget(t, key, func(pdb *policyv1.PodDisruptionBudget) bool { return pdb.Spec.MinAvailable != nil })
	update(t, key, func(ps *podsetv1alpha1.PodSet) { ps.Spec.DisruptionBudget = nil })
	waitForBudget(t, key, nil)
	foreignBudget := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))},
	}
	if err := env.Client.Create(t.Context(), foreignBudget); err != nil {
		t.Fatal(err)
	}
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.DisruptionBudget = &podsetv1alpha1.PodSetDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	})
	stalled(t, key, podsetv1alpha1.DisruptionBudgetConflictReason)
	if err := env.Client.Delete(t.Context(), foreignBudget); err != nil {
		t.Fatal(err)
	}
	waitForBudget(t, key, func(pdb *policyv1.PodDisruptionBudget) bool { return pdb.Spec.MaxUnavailable != nil })
	converged(t, ns)
}

func TestShippedRBACIsExactlyWhatTheOperatorUses(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	role, user := bindShippedRole(t, ns)

	rec := &permissionRecorder{used: map[permission]bool{}, refused: map[permission]bool{}}
	op := startOperator(t, ns, operatorOptions{transport: rec.wrap, impersonate: user})
	kubelet(t, ns)
	garbageCollector(t, ns)

	// Everything the operator does: create (opening each pod's readiness
	// gate), scale down, roll out in place (a new ControllerRevision, the
	// old one pruned with a history limit of 0; gates closed and opened),
	// roll back (the old template's revision renumbered), resize in place
	// and recreate a pod whose resize is refused, replace a deleted
	// pod, find a pod name taken by a pod it does not control, and stall on
	// a refused template (Warning events).
	ps := fixture.PodSet(ns, "web").Replicas(3).Create(t, env.Client)
	key := types.NamespacedName{Namespace: ns, Name: ps.Name}
	converged(t, ns)
	update(t, key, func(ps *podsetv1alpha1.PodSet) { *ps.Spec.Replicas = 2 })
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		ps.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	})
	converged(t, ns)
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Containers[0].Image = ps.Spec.Template.Spec.Containers[0].Image + "-rc"
	})
	converged(t, ns)
	update(t, key, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Containers[0].Image = "busybox:1.37" })
	converged(t, ns)
	// Resources in place: the first resize is refused (it would change the
	// pods' QoS class) and the pods are recreated; the second goes through
	// pods/resize.
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}
	})
	converged(t, ns)
	update(t, key, func(ps *podsetv1alpha1.PodSet) {
		ps.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
	})
	converged(t, ns)
	eventually(t, "old revisions pruned to the history limit", func(context.Context) error {
		list := &appsv1.ControllerRevisionList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 2 {
			return fmt.Errorf("%d ControllerRevisions, want the current one and 1 of history", len(list.Items))
		}
		return nil
	})
	checkInvariants(t, ns, nil, op)
	foreign := foreignPods{}
	foreign.create(t, ns, "web-2", nil)
	update(t, key, func(ps *podsetv1alpha1.PodSet) { *ps.Spec.Replicas = 3 })
	stalled(t, key, podsetv1alpha1.PodConflictReason)
	if err := env.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-2"}}); err != nil {
		t.Fatal(err)
	}
	converged(t, ns)
	exerciseBudget(t, ns, key)
	update(t, key, func(ps *podsetv1alpha1.PodSet) { ps.Spec.Template.Spec.Hostname = "Not_A_Label" })
	stalled(t, key, podsetv1alpha1.PodRejectedReason)
	op.stop()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for p := range rec.refused {
		t.Errorf("the shipped role lacks %s: the API server refused it", p)
	}
	// Granted but never sent, each for a reason the API server enforces or
	// a library needs, checked here where it can be.
	justified := map[permission]string{
		{"podset.dev", "podsets/finalizers", "update"}: "setting blockOwnerDeletion on a pod requires update on its owner's finalizers (OwnerReferencesPermissionEnforcement)",
		{"events.k8s.io", "events", "patch"}:           "the events recorder patches an event into a series when it repeats",
		{"", "pods", "list"}:                           "informers fall back to a LIST where the API server serves no streaming lists (watch-list, authorized as watch)",
		{"podset.dev", "podsets", "list"}:              "informers fall back to a LIST where the API server serves no streaming lists (watch-list, authorized as watch)",
		{"apps", "controllerrevisions", "list"}:        "informers fall back to a LIST where the API server serves no streaming lists (watch-list, authorized as watch)",
		{"policy", "poddisruptionbudgets", "list"}:     "informers fall back to a LIST where the API server serves no streaming lists (watch-list, authorized as watch)",
		{"", "nodes", "list"}:                          "informers fall back to a LIST where the API server serves no streaming lists (watch-list, authorized as watch)",
		{"discovery.k8s.io", "endpointslices", "list"}: "informers fall back to a LIST where the API server serves no streaming lists (watch-list, authorized as watch)",
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %s does not set blockOwnerDeletion, so podsets/finalizers update is not needed", p.Name)
		}
	}
	var granted []string
	for _, p := range grants(role) {
		granted = append(granted, p.String())
		if !rec.used[p] && justified[p] == "" {
			t.Errorf("the shipped role grants %s, which the operator never used", p)
		}
	}
	slices.Sort(granted)
	t.Logf("granted: %s", strings.Join(granted, "; "))
}

// grants is every permission a role grants, one per group, resource and
// verb of its rules.
func grants(role *rbacv1.ClusterRole) []permission {
	var out []permission
	for _, rule := range role.Rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					out = append(out, permission{g, res, v})
				}
			}
		}
	}
	return out
}

// waitForBudget waits until the PodDisruptionBudget named like the PodSet
// is controlled by it and satisfies ok, or, with a nil ok, is gone.
func waitForBudget(t *testing.T, key types.NamespacedName, ok func(*policyv1.PodDisruptionBudget) bool) {
	t.Helper()
	eventually(t, "PodDisruptionBudget "+key.Name, func(ctx context.Context) error {
		pdb := &policyv1.PodDisruptionBudget{}
		err := env.Client.Get(ctx, key, pdb)
		switch {
		case ok == nil && apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case ok == nil:
			return fmt.Errorf("PodDisruptionBudget %s still exists", key.Name)
		case metav1.GetControllerOf(pdb) == nil || metav1.GetControllerOf(pdb).Kind != "PodSet" || !ok(pdb):
			return fmt.Errorf("PodDisruptionBudget %s: owners %+v, spec %+v", key.Name, pdb.OwnerReferences, pdb.Spec)
		}
		return nil
	})
}

func TestMetricsEndpointRefusesUnauthenticatedRequests(t *testing.T) {
	ns := testenv.Namespace(t, env.Client, "rel-", nil)
	addr := testenv.FreeAddress(t)
	startOperator(t, ns, operatorOptions{metricsAddr: addr})

	reader := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + ns},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	allowed := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: ns}}
	other := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "someone", Namespace: ns}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: allowed.Name, Namespace: ns}},
	}
	for _, o := range []client.Object{reader, allowed, other, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		token string
		want  int
	}{
		"no credentials":           {"", http.StatusUnauthorized},
		"a token without the role": {token(t, other), http.StatusForbidden},
		"a metrics reader":         {token(t, allowed), http.StatusOK},
	}
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			eventually(t, "metrics answer", func(context.Context) error {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/metrics", nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				resp, err := httpClient.Do(req)
				if err != nil {
					return err
				}
				_ = resp.Body.Close()
				if resp.StatusCode != tc.want {
					return fmt.Errorf("status %d, want %d", resp.StatusCode, tc.want)
				}
				return nil
			})
		})
	}
}

// token issues a short-lived token for a service account (TokenRequest).
func token(t *testing.T, sa *corev1.ServiceAccount) string {
	t.Helper()
	token, err := testenv.ServiceAccountToken(t.Context(), env.Client, sa, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return token
}
