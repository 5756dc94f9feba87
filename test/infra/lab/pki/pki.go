// Package pki owns the lab's credentials: a CA generated at run time under the lab's
// state directory, the certificates signed by it for every component, the
// ServiceAccount signing key pair, and the kubeconfig files that carry them.
// Nothing here is ever written outside the directory it is given.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

const validity = 365 * 24 * time.Hour

// CA is a certificate authority loaded in memory.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// Request describes one certificate to issue.
type Request struct {
	Name   string // file base name: <dir>/<name>.crt and .key
	CN     string
	Orgs   []string
	IPs    []net.IP
	DNS    []string
	Server bool
	Client bool
}

// NewCA creates a CA and writes ca.crt and ca.key into dir.
func NewCA(dir, cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	ca := &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}
	if err := writePair(dir, "ca", ca.CertPEM, key); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs a certificate for r and writes it into dir. It returns the PEM
// certificate and key.
func (ca *CA) Issue(dir string, r Request) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", r.Name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: r.CN, Organization: r.Orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		IPAddresses:  r.IPs,
		DNSNames:     r.DNS,
	}
	if r.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate %s: %w", r.Name, err)
	}
	certPEM = pemBlock("CERTIFICATE", der)
	if err := writePair(dir, r.Name, certPEM, key); err != nil {
		return nil, nil, err
	}
	keyPEM, err = marshalKey(key)
	return certPEM, keyPEM, err
}

// ServiceAccountKeys writes sa.key and sa.pub (ECDSA P-256) into dir.
func ServiceAccountKeys(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	kp, err := marshalKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("marshal service account public key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), kp, 0o600); err != nil {
		return fmt.Errorf("write sa.key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pemBlock("PUBLIC KEY", pub), 0o600); err != nil {
		return fmt.Errorf("write sa.pub: %w", err)
	}
	return nil
}

func writePair(dir, name string, certPEM []byte, key crypto.Signer) error {
	kp, err := marshalKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), certPEM, 0o600); err != nil {
		return fmt.Errorf("write %s.crt: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), kp, 0o600); err != nil {
		return fmt.Errorf("write %s.key: %w", name, err)
	}
	return nil
}

func marshalKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
