package pki

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIssueVerifiesAgainstCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(dir, Request{Name: "node", CN: "system:node:n1", Orgs: []string{"system:nodes"},
		IPs: []net.IP{net.ParseIP("10.77.0.11")}, Server: true, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client verification: %v", err)
	}
	if err := cert.VerifyHostname("10.77.0.11"); err != nil {
		t.Errorf("IP SAN: %v", err)
	}
	if cert.Subject.CommonName != "system:node:n1" || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v", cert.Subject)
	}
	if !strings.Contains(string(keyPEM), "PRIVATE KEY") {
		t.Error("key is not PEM")
	}
	st, err := os.Stat(filepath.Join(dir, "node.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", st.Mode(), err)
	}
}

func TestKubeconfigEmbedsCredentials(t *testing.T) {
	k := Kubeconfig("https://10.77.0.2:6443", []byte("ca"), []byte("cert"), []byte("key"), "admin")
	for _, want := range []string{"server: https://10.77.0.2:6443", "certificate-authority-data: Y2E=", "client-key-data: a2V5", "current-context: estuary-lab"} {
		if !strings.Contains(k, want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, k)
		}
	}
}
