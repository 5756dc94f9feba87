package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/nodens"
	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// nodeInputs are what every node needs from earlier steps.
type nodeInputs struct {
	bin      string   // Kubernetes binaries
	pause    string   // pause image tag
	archives []string // image tarballs to import
	flannel  *FlannelState
}

// startNode brings one node up: its namespace holder and mounts, the CNI
// configuration, containerd with the lab's images, kubelet and kube-proxy.
func (l *Lab) startNode(ctx context.Context, m Member, in nodeInputs) error {
	dir := l.paths.Node(m.Name)
	holder, err := l.startHolder(ctx, m, dir)
	if err != nil {
		return err
	}
	l.setHolder(m.Name, holder)
	if l.opts.CNI == "bridge" {
		if err := installBridgeCNI(dir, l.plan, m); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	if in.flannel != nil {
		if err := l.installFlannelCNI(dir, in.flannel); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	if err := l.startContainerd(ctx, m, dir, holder, in); err != nil {
		return err
	}
	l.p.step("%s: containerd ready, images imported", m.Name)
	if l.kubeadm() { // kubeadm configures the kubelet; kube-proxy is its DaemonSet
		return nil
	}
	if err := l.startKubelet(m, dir, holder, in.bin); err != nil {
		return err
	}
	return l.startKubeProxy(m, dir, holder, in.bin)
}

func (l *Lab) nodeCgroup(m Member) string { return cgroupOf(m.Name + "/system") }

// startHolder starts the process that owns the node's mount and UTS namespaces.
func (l *Lab) startHolder(ctx context.Context, m Member, dir string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("find lab binary: %w", err)
	}
	s := l.spec(m.Name+"-holder", l.nodeCgroup(m), m.NetNS, self, nodens.HolderCommand, m.Name, dir)
	s.NewMountNS = true
	h, err := l.start(s)
	if err != nil {
		return 0, err
	}
	ready := filepath.Join(dir, nodens.ReadyFile)
	if err := h.WaitReady(ctx, "mounted", func() error { _, err := os.Stat(ready); return err }); err != nil {
		return 0, err
	}
	return h.PID, nil
}

// installBridgeCNI copies the reference plugins into the node's /opt/cni/bin (a
// copy, so an installer writing there never touches /usr/lib/cni) and writes the
// conflist for the node's pod CIDR.
func installBridgeCNI(dir string, pl *Plan, m Member) error {
	binDir := filepath.Join(dir, "opt-cni-bin")
	for _, p := range bridgePlugins {
		if err := copyFile(filepath.Join(CNIPluginDir, p), filepath.Join(binDir, p), 0o755); err != nil {
			return err
		}
	}
	var cidrs []string
	for _, c := range pl.NodePodCIDRs(m.Name) {
		cidrs = append(cidrs, c.String())
	}
	conf, err := render.BridgeCNI(cidrs...)
	if err != nil {
		return fmt.Errorf("render bridge conflist: %w", err)
	}
	p := filepath.Join(dir, "etc-cni-net.d", "10-lab-bridge.conflist")
	if err := os.WriteFile(p, conf, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// containerdSocket is the node's containerd socket as seen from the host.
func containerdSocket(dir string) string {
	return filepath.Join(dir, "run-containerd", "containerd.sock")
}

func (l *Lab) startContainerd(ctx context.Context, m Member, dir string, holder int, in nodeInputs) error {
	def, err := exec.Command("containerd", "config", "default").Output()
	if err != nil {
		return fmt.Errorf("containerd config default: %w", err)
	}
	cfg, err := render.Containerd(string(def), render.ContainerdOptions{
		SandboxImage: in.pause, Root: "/var/lib/containerd", State: "/run/containerd",
		Address: "/run/containerd/containerd.sock", CNIBinDir: "/opt/cni/bin", CNIConfDir: "/etc/cni/net.d",
		RegistryConfigPath: l.paths.RegistryHostsDir(),
	})
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	cfgPath := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", cfgPath, err)
	}
	s := l.spec(m.Name+"-containerd", l.nodeCgroup(m), "", "containerd", "--config", cfgPath)
	s.JoinPID = holder
	p, err := l.start(s)
	if err != nil {
		return err
	}
	sock := containerdSocket(dir)
	if err := p.WaitReady(ctx, "serving", func() error {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		return err
	}
	for _, a := range in.archives {
		out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "-n", "k8s.io", "images", "import", a).CombinedOutput() //nolint:gosec // G204: runs programs the lab located itself
		if err != nil {
			return fmt.Errorf("%s: import %s: %w\n%s", m.Name, a, err, out)
		}
	}
	return nil
}

func (l *Lab) startKubelet(m Member, dir string, holder int, bin string) error {
	k := func(f string) string { return filepath.Join(l.paths.PKI(), f) }
	cfg, err := render.Kubelet(render.KubeletOptions{
		CgroupRoot:   "/" + cgroupOf(m.Name),
		ClientCAFile: k("ca.crt"), TLSCertFile: k("serving-kubelet-" + m.Name + ".crt"),
		TLSKeyFile:      k("serving-kubelet-" + m.Name + ".key"),
		RuntimeEndpoint: "unix:///run/containerd/containerd.sock",
		ClusterDNS:      l.plan.DNSService.String(),
	})
	if err != nil {
		return fmt.Errorf("render kubelet config: %w", err)
	}
	cfgPath := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", cfgPath, err)
	}
	s := l.spec(m.Name+"-kubelet", l.nodeCgroup(m), "", filepath.Join(bin, "kubelet"),
		"--config="+cfgPath, "--kubeconfig="+filepath.Join(dir, "kubelet.kubeconfig"),
		"--hostname-override="+m.Name, "--node-ip="+l.plan.nodeIPFlag(m.Name), "--v=1")
	s.JoinPID = holder
	_, err = l.start(s)
	return err
}

func (l *Lab) startKubeProxy(m Member, dir string, holder int, bin string) error {
	cfg, err := render.KubeProxy(filepath.Join(dir, "kube-proxy.kubeconfig"), m.Name,
		l.plan.joined(func(p *Plan) string { return p.Pods.String() }), l.opts.ProxyMode)
	if err != nil {
		return fmt.Errorf("render kube-proxy config: %w", err)
	}
	cfgPath := filepath.Join(dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", cfgPath, err)
	}
	s := l.spec(m.Name+"-kube-proxy", l.nodeCgroup(m), "", filepath.Join(bin, "kube-proxy"),
		"--config="+cfgPath, "--v=1")
	s.JoinPID = holder
	_, err = l.start(s)
	return err
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(filepath.Clean(src))
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dst), err)
	}
	out, err := os.OpenFile(filepath.Clean(dst), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}
