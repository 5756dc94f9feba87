package pki

import (
	"errors"
	"fmt"
	"net/url"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigName names the cluster and the context of every kubeconfig the lab writes.
const kubeconfigName = "estuary-lab"

// KubeconfigConfig is a kubeconfig with embedded credentials for one user:
// one cluster and one context, both named estuary-lab, the context current.
func KubeconfigConfig(server string, caPEM, certPEM, keyPEM []byte, user string) *clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	c.Clusters[kubeconfigName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	c.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	c.Contexts[kubeconfigName] = &clientcmdapi.Context{Cluster: kubeconfigName, AuthInfo: user}
	c.CurrentContext = kubeconfigName
	return c
}

// Kubeconfig renders KubeconfigConfig(...) as kubeconfig YAML.
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte, user string) ([]byte, error) {
	b, err := clientcmd.Write(*KubeconfigConfig(server, caPEM, certPEM, keyPEM, user))
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig for user %s: %w", user, err)
	}
	return b, nil
}

// WriteKubeconfig writes KubeconfigConfig(...) to path with owner-only permissions.
func WriteKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte, user string) error {
	return writeConfig(KubeconfigConfig(server, caPEM, certPEM, keyPEM, user), path)
}

// RewriteServer loads the kubeconfig at src (kubeadm's admin.conf, say),
// points every cluster in it at server and writes the result to dst with
// owner-only permissions. src and dst may be the same file. A server that
// is not an absolute URL, or a kubeconfig without clusters, is refused and
// dst is left as it was.
func RewriteServer(src, dst, server string) error {
	if u, err := url.Parse(server); err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("rewrite kubeconfig %s: server %q is not an absolute URL", src, server)
	}
	c, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", src, err)
	}
	if len(c.Clusters) == 0 {
		return fmt.Errorf("rewrite kubeconfig %s: clusters: none to point at %s", src, server)
	}
	for _, cl := range c.Clusters {
		cl.Server = server
	}
	return writeConfig(c, dst)
}

// writeConfig writes c to path as kubeconfig YAML, mode 0600 whether or not
// path existed before (clientcmd.WriteToFile sets the mode only on create).
func writeConfig(c *clientcmdapi.Config, path string) error {
	if err := os.Chmod(path, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
