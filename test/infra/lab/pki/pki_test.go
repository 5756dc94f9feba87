package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
	k, err := Kubeconfig("https://10.77.0.2:6443", []byte("ca"), []byte("cert"), []byte("key"), "admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server: https://10.77.0.2:6443", "certificate-authority-data: Y2E=", "client-key-data: a2V5", "current-context: estuary-lab"} {
		if !strings.Contains(string(k), want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, k)
		}
	}
}

// The written file is owner-only and reads back with clientcmd as one
// cluster, one user and one current context carrying the credentials, and
// client-go builds a TLS client configuration from it.
func TestWriteKubeconfigReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := WriteKubeconfig(path, "https://10.77.0.2:6443", []byte("ca"), []byte("cert"), []byte("key"), "admin"); err != nil {
		t.Fatal(err)
	}
	assertMode(t, path)
	c, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cl, u, ctx := c.Clusters["estuary-lab"], c.AuthInfos["admin"], c.Contexts["estuary-lab"]
	if len(c.Clusters) != 1 || len(c.AuthInfos) != 1 || len(c.Contexts) != 1 || cl == nil || u == nil || ctx == nil {
		t.Fatalf("want cluster estuary-lab, user admin, context estuary-lab; got %+v", c)
	}
	if cl.Server != "https://10.77.0.2:6443" || string(cl.CertificateAuthorityData) != "ca" {
		t.Errorf("cluster: server %q CA %q", cl.Server, cl.CertificateAuthorityData)
	}
	if string(u.ClientCertificateData) != "cert" || string(u.ClientKeyData) != "key" {
		t.Errorf("user: cert %q key %q", u.ClientCertificateData, u.ClientKeyData)
	}
	if c.CurrentContext != "estuary-lab" || ctx.Cluster != "estuary-lab" || ctx.AuthInfo != "admin" {
		t.Errorf("context: current %q, %+v", c.CurrentContext, ctx)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*c, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://10.77.0.2:6443" || string(rc.CAData) != "ca" || string(rc.CertData) != "cert" || string(rc.KeyData) != "key" {
		t.Errorf("rest config: host %q CA %q cert %q key %q", rc.Host, rc.CAData, rc.CertData, rc.KeyData)
	}
}

// RewriteServer points every cluster of a kubeconfig at the new server and
// keeps everything else; the result is owner-only even when the source and
// an existing destination were readable by others.
func TestRewriteServerPointsEveryCluster(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "admin.conf"), filepath.Join(dir, "kubeconfig")
	in := clientcmdapi.NewConfig()
	in.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: "https://10.77.0.2:6443", CertificateAuthorityData: []byte("ca")}
	in.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://10.77.0.3:6443"}
	in.AuthInfos["kubernetes-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	in.Contexts["kubernetes-admin@kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "kubernetes-admin"}
	in.CurrentContext = "kubernetes-admin@kubernetes"
	if err := clientcmd.WriteToFile(*in, src); err != nil {
		t.Fatal(err)
	}
	b := mustRead(t, src)
	for _, p := range []string{src, dst} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := RewriteServer(src, dst, "https://127.0.0.1:16443"); err != nil {
		t.Fatal(err)
	}
	assertMode(t, dst)
	out, err := clientcmd.LoadFromFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	for name, cl := range out.Clusters {
		if cl.Server != "https://127.0.0.1:16443" {
			t.Errorf("cluster %s: server %q, want https://127.0.0.1:16443", name, cl.Server)
		}
	}
	if len(out.Clusters) != 2 || string(out.Clusters["kubernetes"].CertificateAuthorityData) != "ca" {
		t.Errorf("clusters: %+v", out.Clusters)
	}
	if u := out.AuthInfos["kubernetes-admin"]; u == nil || string(u.ClientCertificateData) != "cert" || string(u.ClientKeyData) != "key" {
		t.Errorf("user kubernetes-admin: %+v", u)
	}
	if out.CurrentContext != "kubernetes-admin@kubernetes" || out.Contexts["kubernetes-admin@kubernetes"] == nil {
		t.Errorf("context: current %q, %+v", out.CurrentContext, out.Contexts)
	}
	if orig, err := clientcmd.LoadFromFile(src); err != nil || orig.Clusters["kubernetes"].Server != "https://10.77.0.2:6443" {
		t.Errorf("source changed: %v %+v", err, orig)
	}
}

// A server that is not a URL, a kubeconfig without clusters and a missing
// source are refused, naming what is wrong, and the destination is not written.
func TestRewriteServerRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	good, empty, dst := filepath.Join(dir, "good"), filepath.Join(dir, "empty"), filepath.Join(dir, "dst")
	if err := WriteKubeconfig(good, "https://10.77.0.2:6443", []byte("ca"), []byte("cert"), []byte("key"), "admin"); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*clientcmdapi.NewConfig(), empty); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ src, server, want string }{
		{good, "10.77.0.2:6443", "not an absolute URL"},
		{good, "", "not an absolute URL"},
		{empty, "https://127.0.0.1:16443", "clusters: none"},
		{filepath.Join(dir, "missing"), "https://127.0.0.1:16443", "load kubeconfig"},
	} {
		err := RewriteServer(tc.src, dst, tc.server)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RewriteServer(%s, %q) = %v, want an error containing %q", filepath.Base(tc.src), tc.server, err, tc.want)
		}
		if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("RewriteServer(%s, %q) wrote %s: %v", filepath.Base(tc.src), tc.server, dst, err)
		}
	}
}

func assertMode(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s mode: %v %v, want 0600", path, st, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
