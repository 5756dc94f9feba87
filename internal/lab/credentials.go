package lab

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/estuary-cni/estuary/internal/lab/pki"
)

type kubeconfigSpec struct {
	name, path, server, cn string
	orgs                   []string
}

// credentials issues the CA, every component's certificate, the ServiceAccount keys
// and the kubeconfigs. All of it is generated at run time under <state>/pki.
func (l *Lab) credentials() error {
	dir := l.paths.PKI()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	ca, err := pki.NewCA(dir, "estuary-lab-ca")
	if err != nil {
		return err
	}
	if err := pki.ServiceAccountKeys(dir); err != nil {
		return err
	}
	pl := l.plan
	ip := func(s string) net.IP { return net.ParseIP(s) }
	if _, _, err := ca.Issue(dir, pki.Request{
		Name: "apiserver", CN: "kube-apiserver", Server: true,
		IPs: []net.IP{ip(pl.ControlPlane.Addr.String()), ip(pl.APIService.String()), ip("127.0.0.1")},
		DNS: []string{"localhost", "control-plane", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}); err != nil {
		return err
	}
	if _, _, err := ca.Issue(dir, pki.Request{Name: "apiserver-kubelet-client", CN: "kube-apiserver-kubelet-client",
		Orgs: []string{"system:masters"}, Client: true}); err != nil {
		return err
	}
	inLab := pl.APIServerURL()
	host := fmt.Sprintf("https://127.0.0.1:%d", l.opts.HostAPIPort)
	kcs := []kubeconfigSpec{
		{"admin-host", l.paths.Kubeconfig(), host, "estuary-lab-admin", []string{"system:masters"}},
		{"admin", filepath.Join(l.paths.ControlPlane(), "admin.kubeconfig"), inLab, "estuary-lab-admin", []string{"system:masters"}},
		{"controller-manager", filepath.Join(l.paths.ControlPlane(), "controller-manager.kubeconfig"), inLab, "system:kube-controller-manager", nil},
		{"scheduler", filepath.Join(l.paths.ControlPlane(), "scheduler.kubeconfig"), inLab, "system:kube-scheduler", nil},
	}
	for _, n := range pl.Nodes {
		nd := l.paths.Node(n.Name)
		kcs = append(kcs,
			kubeconfigSpec{"kubelet-" + n.Name, filepath.Join(nd, "kubelet.kubeconfig"), inLab, "system:node:" + n.Name, []string{"system:nodes"}},
			kubeconfigSpec{"kube-proxy-" + n.Name, filepath.Join(nd, "kube-proxy.kubeconfig"), inLab, "system:kube-proxy", nil})
		if _, _, err := ca.Issue(dir, pki.Request{Name: "serving-kubelet-" + n.Name, CN: n.Name, Server: true,
			IPs: []net.IP{ip(n.Addr.String())}, DNS: []string{n.Name}}); err != nil {
			return err
		}
	}
	for _, k := range kcs {
		if err := os.MkdirAll(filepath.Dir(k.path), 0o750); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(k.path), err)
		}
		cert, key, err := ca.Issue(dir, pki.Request{Name: "client-" + k.name, CN: k.cn, Orgs: k.orgs, Client: true})
		if err != nil {
			return err
		}
		if err := pki.WriteKubeconfig(k.path, k.server, ca.CertPEM, cert, key, k.cn); err != nil {
			return err
		}
	}
	return nil
}
