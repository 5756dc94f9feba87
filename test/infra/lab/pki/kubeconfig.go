package pki

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// Kubeconfig renders a kubeconfig with embedded credentials for one user.
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte, user string) string {
	b64 := base64.StdEncoding.EncodeToString
	var s strings.Builder
	fmt.Fprintf(&s, "apiVersion: v1\nkind: Config\nclusters:\n- name: estuary-lab\n  cluster:\n")
	fmt.Fprintf(&s, "    server: %s\n    certificate-authority-data: %s\n", server, b64(caPEM))
	fmt.Fprintf(&s, "users:\n- name: %s\n  user:\n", user)
	fmt.Fprintf(&s, "    client-certificate-data: %s\n    client-key-data: %s\n", b64(certPEM), b64(keyPEM))
	fmt.Fprintf(&s, "contexts:\n- name: estuary-lab\n  context:\n    cluster: estuary-lab\n    user: %s\n", user)
	fmt.Fprintf(&s, "current-context: estuary-lab\n")
	return s.String()
}

// WriteKubeconfig writes Kubeconfig(...) to path with owner-only permissions.
func WriteKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte, user string) error {
	if err := os.WriteFile(path, []byte(Kubeconfig(server, caPEM, certPEM, keyPEM, user)), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
