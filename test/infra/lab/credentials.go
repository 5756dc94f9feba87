package lab

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/estuary-cni/estuary/test/infra/lab/pki"
	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// serverIPs are the API server certificate's addresses: the control plane's
// and the first Service address of every family, and loopback.
func (p *Plan) serverIPs() []net.IP {
	var out []netip.Addr
	for _, s := range p.Stacks() {
		out = append(out, s.ControlPlane.Addr, s.APIService)
	}
	return append(netIPs(out), net.IPv4(127, 0, 0, 1), net.IPv6loopback)
}

func netIPs(as []netip.Addr) []net.IP {
	out := make([]net.IP, 0, len(as))
	for _, a := range as {
		out = append(out, net.IP(a.AsSlice()))
	}
	return out
}

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
	if _, _, err := ca.Issue(dir, pki.Request{
		Name: "apiserver", CN: "kube-apiserver", Server: true,
		IPs: pl.serverIPs(),
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
		if l.opts.CNI == "flannel" {
			kcs = append(kcs, kubeconfigSpec{"flanneld-" + n.Name, filepath.Join(nd, "flanneld.kubeconfig"), inLab, render.FlannelUser, nil})
		}
		if _, _, err := ca.Issue(dir, pki.Request{Name: "serving-kubelet-" + n.Name, CN: n.Name, Server: true,
			IPs: netIPs(pl.NodeIPs(n.Name)), DNS: []string{n.Name}}); err != nil {
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
