package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/estuary-cni/estuary/internal/webhook"
)

// TestCertRotation runs the webhook with certificate rotation against
// configurations of its own (the suite's carry envtest's CA): the rotator
// fills the empty Secret with a CA and a serving certificate for the
// Service and injects the CA into both configurations; once the certificate
// is "mounted" (the test copies it to the directory as the kubelet would)
// the webhook server starts, serves that certificate and is ready.
func TestCertRotation(t *testing.T) {
	const name = "estuary-rotation-test"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "estuary-webhook-certs"}}
	validating, mutating := unreachableConfigurations(name)
	seed(t, secret, validating, mutating)

	dir, port := t.TempDir(), freePort(t)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}),
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	ready, err := webhook.SetupWithRotation(context.Background(), mgr, webhook.CertRotation{
		Secret:  types.NamespacedName{Namespace: "default", Name: secret.Name},
		Service: "estuary-webhook", Configuration: name, CertDir: dir,
	}, webhook.Options{})
	if err != nil {
		t.Fatalf("setup with rotation: %v", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		if err := mgr.Start(runCtx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	data := mountSecret(t, secret, dir)
	select {
	case <-ready:
	case <-time.After(45 * time.Second):
		t.Fatal("rotator did not report ready")
	}
	requireServingCert(t, data, "estuary-webhook.default.svc")
	requireInjected(t, name, data["ca.crt"])
	check := webhook.ReadyCheck(mgr, ready)
	err = wait.PollUntilContextTimeout(ctx(t), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return check(&http.Request{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("webhook server not ready: %v", check(&http.Request{}))
	}
	requireServed(t, port, data["ca.crt"], "estuary-webhook.default.svc")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// requireServed asserts the webhook server presents a certificate that the
// CA vouches for under the Service's name.
func requireServed(t *testing.T, port int, ca []byte, dnsName string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{RootCAs: pool, ServerName: dnsName, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS to the webhook server with the rotated CA: %v", err)
	}
	_ = conn.Close()
}

// unreachableConfigurations are webhook configurations that match nothing,
// so the CA the rotator injects never decides a request.
func unreachableConfigurations(name string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"nothing.example"}, APIVersions: []string{"v1"},
			Resources: []string{"nothings"}},
	}}
	cc := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/nothing")}
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "nothing.estuary.io", ClientConfig: cc, Rules: rules,
				SideEffects: none, AdmissionReviewVersions: []string{"v1"}}},
		}, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "nothing.estuary.io", ClientConfig: cc, Rules: rules,
				SideEffects: none, AdmissionReviewVersions: []string{"v1"}}},
		}
}

// mountSecret waits until the rotator has filled the Secret and writes its
// keys into dir, as the kubelet does for a mounted Secret.
func mountSecret(t *testing.T, secret *corev1.Secret, dir string) map[string][]byte {
	t.Helper()
	got := &corev1.Secret{}
	err := wait.PollUntilContextTimeout(ctx(t), 50*time.Millisecond, 20*time.Second, true, func(c context.Context) (bool, error) {
		if err := k8s.Get(c, client.ObjectKeyFromObject(secret), got); err != nil {
			return false, err
		}
		return len(got.Data["tls.crt"]) > 0 && len(got.Data["tls.key"]) > 0 && len(got.Data["ca.crt"]) > 0, nil
	})
	if err != nil {
		t.Fatalf("secret not filled: %v", err)
	}
	for k, v := range got.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return got.Data
}

func requireServingCert(t *testing.T, data map[string][]byte, dnsName string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data["ca.crt"]) {
		t.Fatal("ca.crt holds no certificate")
	}
	block, _ := pem.Decode(data["tls.crt"])
	if block == nil {
		t.Fatal("tls.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parse tls.crt: %v", err)
	}
	opts := x509.VerifyOptions{Roots: pool, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := cert.Verify(opts); err != nil {
		t.Errorf("serving certificate does not verify for %s: %v", dnsName, err)
	}
}

func requireInjected(t *testing.T, name string, ca []byte) {
	t.Helper()
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: name}, v); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, ca) || !bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, ca) {
		t.Error("the CA was not injected into both configurations")
	}
}
