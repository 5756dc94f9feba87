// Package servingcert serves TLS with a certificate and key kept in files
// that change under a running server: a Secret the kubelet mounts and
// updates in place when its owner renews the certificate.
//
// The files are read at each handshake and parsed again only when their
// bytes changed, so a renewed certificate is served from the next
// connection on, with no restart and no watch to miss. Until the files
// exist (the Secret is still empty, or not mounted yet) a handshake fails
// with an error that says so, and the server keeps running: a component
// whose metrics are not served yet keeps doing its work.
package servingcert

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// The file names of a kubernetes.io/tls Secret, the ones cert-controller's
// rotator writes.
const (
	CertFileName = "tls.crt"
	KeyFileName  = "tls.key"
)

// ErrNotInPlace is returned while the certificate files do not exist.
var ErrNotInPlace = errors.New("serving certificate not in place yet")

// Files is a certificate and key read from two files at each handshake.
type Files struct {
	certFile, keyFile string

	mu              sync.Mutex
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

// NewFiles reads dir's tls.crt and tls.key.
func NewFiles(dir string) *Files {
	return &Files{certFile: filepath.Join(dir, CertFileName), keyFile: filepath.Join(dir, KeyFileName)}
}

// GetCertificate is tls.Config's GetCertificate: the files' certificate.
// A pair that does not parse (read across a renewal: the certificate of one
// and the key of the other) is read once more; if it still does not, the
// last good certificate is served, or the error returned when there is none.
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	for range 2 {
		var cert *tls.Certificate
		if cert, err = f.load(); err == nil {
			return cert, nil
		}
	}
	if f.cert != nil {
		return f.cert, nil
	}
	return nil, err
}

// load reads both files and parses them unless they are what was parsed
// last. f.mu is held.
func (f *Files) load() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(f.certFile)
	if err != nil {
		return nil, readError(f.certFile, err)
	}
	keyPEM, err := os.ReadFile(f.keyFile)
	if err != nil {
		return nil, readError(f.keyFile, err)
	}
	if f.cert != nil && bytes.Equal(certPEM, f.certPEM) && bytes.Equal(keyPEM, f.keyPEM) {
		return f.cert, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %s and key %s: %w", f.certFile, f.keyFile, err)
	}
	f.cert, f.certPEM, f.keyPEM = &pair, certPEM, keyPEM
	return f.cert, nil
}

func readError(file string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no %s", ErrNotInPlace, file)
	}
	return fmt.Errorf("read serving certificate: %w", err)
}

// TLSConfig is a server configuration that serves the certificate of
// dir's files, TLS 1.2 or later, HTTP/1.1 only (a metrics endpoint needs
// nothing of HTTP/2, and HTTP/1.1 keeps it out of HTTP/2's stream-reset
// floods).
func TLSConfig(dir string) *tls.Config {
	return &tls.Config{GetCertificate: NewFiles(dir).GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}
