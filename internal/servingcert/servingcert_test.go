package servingcert

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

// pair is a certificate and its key, PEM.
type pair struct{ cert, key []byte }

func newPair(t *testing.T, host string) pair {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pair{cert, key}
}

// leaf is the DER of p's first certificate.
func (p pair) leaf(t *testing.T) []byte {
	t.Helper()
	b, _ := pem.Decode(p.cert)
	if b == nil {
		t.Fatal("no PEM certificate")
	}
	return b.Bytes
}

// writeFile replaces name in dir in one rename, as the kubelet's atomic
// writer swaps a Secret's files.
func writeFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func install(t *testing.T, dir string, p pair) {
	t.Helper()
	writeFile(t, dir, KeyFileName, p.key)
	writeFile(t, dir, CertFileName, p.cert)
}

// serve accepts TLS connections with cfg on loopback until the test ends
// and returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	return lis.Addr().String()
}

// served is the certificate the server at addr presents, or the handshake's
// error.
func served(addr string) ([]byte, error) {
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: "metrics.test"}) //nolint:gosec // G402: the test compares the certificate itself
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	return c.ConnectionState().PeerCertificates[0].Raw, nil
}

// TestServesTheFilesAsTheyChange: before the files exist the server runs
// and refuses handshakes; once they are written it serves them; a renewal
// is served from the next connection on; a certificate written without its
// key leaves the last good pair served; a pair that does not parse while
// nothing was ever served is an error naming the files.
func TestServesTheFilesAsTheyChange(t *testing.T) {
	dir := t.TempDir()
	addr := serve(t, TLSConfig(dir))
	if _, err := served(addr); err == nil {
		t.Fatal("handshake succeeded with no certificate files")
	}
	if _, err := NewFiles(dir).GetCertificate(nil); !errors.Is(err, ErrNotInPlace) {
		t.Errorf("no files: %v; want ErrNotInPlace", err)
	}

	a, b := newPair(t, "a.test"), newPair(t, "b.test")
	install(t, dir, a)
	if got, err := served(addr); err != nil || !bytes.Equal(got, a.leaf(t)) {
		t.Fatalf("after the files appeared: %v; want certificate a", err)
	}
	install(t, dir, b)
	if got, err := served(addr); err != nil || !bytes.Equal(got, b.leaf(t)) {
		t.Fatalf("after renewal: %v; want certificate b", err)
	}
	writeFile(t, dir, CertFileName, a.cert) // b's key stays: a mismatched pair
	if got, err := served(addr); err != nil || !bytes.Equal(got, b.leaf(t)) {
		t.Fatalf("with a mismatched pair: %v; want the last good certificate b", err)
	}

	fresh := t.TempDir()
	writeFile(t, fresh, CertFileName, a.cert)
	writeFile(t, fresh, KeyFileName, b.key)
	if _, err := NewFiles(fresh).GetCertificate(nil); err == nil || !strings.Contains(err.Error(), CertFileName) {
		t.Errorf("mismatched pair, nothing served before: %v; want an error naming %s", err, CertFileName)
	}
}

// TestConfigOffersHTTP1Only: the configuration offers HTTP/1.1 alone and
// no TLS before 1.2.
func TestConfigOffersHTTP1Only(t *testing.T) {
	c := TLSConfig(t.TempDir())
	if len(c.NextProtos) != 1 || c.NextProtos[0] != "http/1.1" || c.MinVersion != tls.VersionTLS12 {
		t.Errorf("NextProtos %v MinVersion %x", c.NextProtos, c.MinVersion)
	}
}
