//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podsetv1alpha1 "github.com/podset-dev/podset-operator/apis/v1alpha1"
	"github.com/podset-dev/podset-operator/test/testenv"
)

// metricsServerName is the DNS name of the metrics Service, which the
// certificate of config/certmanager names and config/prometheus verifies.
const metricsServerName = "podset-operator-metrics.podset-system.svc"

// TestMetricsServedWithAMountedCertificate runs the operator with a serving
// certificate signed by a CA of the test's (as cert-manager mounts one with
// config/certmanager) and scrapes it the way config/prometheus does: the
// certificate verified against that CA for the Service's name, and the
// bearer token of a service account bound to the metrics-reader role. A
// renewed certificate is served without a restart, and HTTP/2 is off.
func TestMetricsServedWithAMountedCertificate(t *testing.T) {
	requireInstalled(t)
	scaleOperatorDeploymentToZero(t)

	ca := newCA(t)
	certDir := t.TempDir()
	first := ca.issue(t, certDir)
	addr := testenv.FreeAddress(t)
	startOperator(t, "--metrics-bind-address", addr, "--metrics-cert-path", certDir)
	url := "https://" + addr + "/metrics"

	scraper := newServiceAccountToken(t, "podset-operator-metrics-reader")
	outsider := newServiceAccountToken(t, "")
	verified := ca.client(metricsServerName)

	var resp *scrape
	eventually(t, "an authorized scrape answers 200 over the served certificate", func(ctx context.Context) (err error) {
		resp, err = get(ctx, verified, url, scraper)
		if err == nil && resp.status != http.StatusOK {
			err = fmt.Errorf("GET %s: %d", url, resp.status)
		}
		return err
	})
	if !bytes.Equal(resp.leaf.Raw, first.Raw) {
		t.Errorf("the endpoint serves a certificate with serial %v, not the mounted one (serial %v)", resp.leaf.SerialNumber, first.SerialNumber)
	}
	if !strings.Contains(resp.body, "controller_runtime_reconcile_total") {
		t.Errorf("the metrics have no controller_runtime_reconcile_total:\n%.2000s", resp.body)
	}
	if resp.proto != "HTTP/1.1" {
		t.Errorf("a client offering HTTP/2 got %s, want HTTP/1.1 (--enable-http2 is off by default)", resp.proto)
	}

	// The per-PodSet metrics say what the PodSet's status says.
	ps := applySample(t, newNamespace(t, "podset-metrics-", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}))
	waitForPodSet(t, ps, int(*ps.Spec.Replicas))
	eventually(t, "the PodSet's metrics equal its status", func(ctx context.Context) error {
		got, err := get(ctx, verified, url, scraper)
		if err != nil {
			return err
		}
		return checkPodSetMetrics(ctx, got.body, ps)
	})

	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a service account without the metrics-reader role", outsider, http.StatusForbidden},
	} {
		got, err := get(t.Context(), verified, url, c.token)
		if err != nil {
			t.Fatalf("scraping with %s: %v", c.name, err)
		}
		if got.status != c.want {
			t.Errorf("scraping with %s: status %d, want %d", c.name, got.status, c.want)
		}
	}

	// A renewal (cert-manager rewrites the Secret, the kubelet the mounted
	// files) is picked up without a restart.
	renewed := ca.issue(t, certDir)
	eventually(t, "the renewed certificate is served", func(ctx context.Context) error {
		got, err := get(ctx, verified, url, scraper)
		if err != nil {
			return err
		}
		if !bytes.Equal(got.leaf.Raw, renewed.Raw) {
			return fmt.Errorf("still serving serial %v, want %v", got.leaf.SerialNumber, renewed.SerialNumber)
		}
		return nil
	})
}

// testCA is a certificate authority of the test's.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "podset-e2e CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// issue writes a new serving certificate for the metrics Service's names
// into dir as tls.crt and tls.key (the names a cert-manager Secret mounts
// as), and returns it.
func (ca *testCA) issue(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: metricsServerName},
		DNSNames:     []string{metricsServerName, metricsServerName + ".cluster.local"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// The key first: the watcher reloads on the certificate's change and
	// then needs the matching key.
	writePEM(t, filepath.Join(dir, "tls.key"), "PRIVATE KEY", keyDER)
	writePEM(t, filepath.Join(dir, "tls.crt"), "CERTIFICATE", der)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// client is an HTTPS client that trusts only ca and expects serverName,
// and offers HTTP/2 as Prometheus does.
func (ca *testCA) client(serverName string) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			DisableKeepAlives: true,
		},
	}
}

func writePEM(t *testing.T, path, blockType string, der []byte) {
	t.Helper()
	// Written aside and renamed, as the kubelet updates a mounted Secret:
	// the watcher never reads half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// scrape is what one GET of the metrics endpoint returned.
type scrape struct {
	status int
	proto  string
	leaf   *x509.Certificate
	body   string
}

// get fetches url with client, with token as the bearer token unless empty.
func get(ctx context.Context, client *http.Client, url, token string) (*scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &scrape{status: resp.StatusCode, proto: resp.Proto, leaf: resp.TLS.PeerCertificates[0], body: string(body)}, nil
}

// newServiceAccountToken creates a service account in a new namespace,
// binds it to clusterRole unless empty, and returns a token for it, as
// Prometheus's own service account has.
func newServiceAccountToken(t *testing.T, clusterRole string) string {
	t.Helper()
	ns := newNamespace(t, "podset-scraper-", nil)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	if err := suite.client.Create(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
		}
		if err := suite.client.Create(t.Context(), binding); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = suite.client.Delete(context.Background(), binding) })
	}
	token, err := testenv.ServiceAccountToken(t.Context(), suite.client, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// checkPodSetMetrics is nil when the scraped body has the gauges of ps with
// the values of its stored status, as the metric names and labels of the
// "What to watch" of docs/runbooks.md say.
func checkPodSetMetrics(ctx context.Context, body string, ps *podsetv1alpha1.PodSet) error {
	got := &podsetv1alpha1.PodSet{}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), got); err != nil {
		return err
	}
	families, err := testenv.ParseMetrics(strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("parsing the scrape: %w", err)
	}
	s := got.Status
	ready := meta.FindStatusCondition(s.Conditions, podsetv1alpha1.ReadyCondition)
	if ready == nil {
		return errors.New("no Ready condition yet")
	}
	want := map[string]struct {
		labels map[string]string
		value  float64
	}{
		"podset_spec_replicas":                     {nil, float64(*got.Spec.Replicas)},
		"podset_status_replicas":                   {nil, float64(s.Replicas)},
		"podset_status_replicas_ready":             {nil, float64(s.ReadyReplicas)},
		"podset_status_replicas_available":         {nil, float64(s.AvailableReplicas)},
		"podset_status_replicas_updated":           {nil, float64(s.UpdatedReplicas)},
		"podset_status_update_revision":            {map[string]string{"revision": s.UpdateRevision}, 1},
		"podset_status_current_revision":           {map[string]string{"revision": s.CurrentRevision}, 1},
		"podset_status_last_progress_time_seconds": {nil, float64(s.LastProgressTime.Unix())},
		"podset_status_condition": {map[string]string{
			"condition": ready.Type, "status": strings.ToLower(string(ready.Status)), "reason": ready.Reason,
		}, 1},
	}
	for name, w := range want {
		labels := map[string]string{"namespace": got.Namespace, "podset": got.Name}
		maps.Copy(labels, w.labels)
		if v, ok := families.Sample(name, labels); !ok || v != w.value {
			return fmt.Errorf("%s%v: %v (found: %v), want %v", name, labels, v, ok, w.value)
		}
	}
	return nil
}
