package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// `up --cni flannel` runs the real flannel beside which estuary is measured:
// flanneld built from flannel's Go module (hack/flanneld), with the Kubernetes
// subnet manager and the VXLAN backend, as one host process per node in the
// node's namespaces (as kubelet and kube-proxy run), and pods on bridge and
// host-local through the lab's flannel CNI plugin, which reads flanneld's
// lease as flannel's own plugin does. kube-controller-manager allocates the
// nodes' pod CIDRs, flannel's leases.
const (
	// FlannelSubnetFile is where flanneld writes the node's lease, inside the node.
	FlannelSubnetFile = "/run/flannel/subnet.env"
	// FlannelNetConfFile is flannel's network configuration, inside the node.
	FlannelNetConfFile = "/etc/kube-flannel/net-conf.json"
	// FlannelDevice is the VXLAN device flannel's backend makes (VNI 1).
	FlannelDevice = "flannel.1"
	flannelModule = "github.com/flannel-io/flannel"
	// flannelTimeout bounds the wait for every node's lease.
	flannelTimeout = 2 * time.Minute
)

// FlannelState records the flannel of a lab.
type FlannelState struct {
	Version string `json:"version"` // flannel's module version
	BinDir  string `json:"binDir"`  // flanneld and the flannel CNI plugin
	Backend string `json:"backend"`
}

// flannelSrc is the module flanneld and the CNI plugin are built from.
func flannelSrc(repo string) string { return filepath.Join(repo, "hack", "flanneld") }

// flannelVersion reads the flannel version the module requires.
func flannelVersion(gomod string) (string, error) {
	f, err := os.Open(filepath.Clean(gomod))
	if err != nil {
		return "", fmt.Errorf("flannel module: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && fields[0] == flannelModule {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s requires no %s", gomod, flannelModule)
}

// prepareFlannel builds flanneld and the flannel CNI plugin (static, into the
// cache, keyed by flannel's version; go's build cache makes a rebuild cheap).
func (l *Lab) prepareFlannel(repo string) (*FlannelState, error) {
	src := flannelSrc(repo)
	version, err := flannelVersion(filepath.Join(src, "go.mod"))
	if err != nil {
		return nil, err
	}
	out := filepath.Join(l.opts.CacheDir, "lab", "flannel-"+version)
	l.step("flannel %s: flanneld and the flannel CNI plugin (go build -C hack/flanneld, into %s)", version, out)
	start := time.Now()
	cmd := exec.Command("go", "build", "-C", src, "-o", out+"/", //nolint:gosec // G204: the lab's own build
		"-ldflags", "-X "+flannelModule+"/pkg/version.Version="+version, ".", "./cni/flannel")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build flanneld: %w\n%s", err, lastLines(string(b), 20))
	}
	l.p.printf("           built in %s\n", time.Since(start).Round(100*time.Millisecond))
	return &FlannelState{Version: version, BinDir: out, Backend: "vxlan"}, nil
}

// installFlannelCNI puts on a node what flannel's manifest puts there before
// flanneld starts: the CNI plugins (flannel, and the bridge, host-local,
// portmap and loopback it relies on), the conflist and flannel's network
// configuration.
func (l *Lab) installFlannelCNI(dir string, fl *FlannelState) error {
	binDir := filepath.Join(dir, "opt-cni-bin")
	for _, p := range bridgePlugins {
		if err := copyFile(filepath.Join(CNIPluginDir, p), filepath.Join(binDir, p), 0o755); err != nil {
			return err
		}
	}
	if err := copyFile(filepath.Join(fl.BinDir, "flannel"), filepath.Join(binDir, "flannel"), 0o755); err != nil {
		return err
	}
	conf, err := render.FlannelCNI()
	if err != nil {
		return fmt.Errorf("render flannel conflist: %w", err)
	}
	if err := writeConfig(filepath.Join(dir, "etc-cni-net.d", "10-flannel.conflist"), conf); err != nil {
		return err
	}
	netConf, err := render.FlannelNetConf(l.plan.podRanges(), l.opts.ProxyMode == "nftables")
	if err != nil {
		return err
	}
	return writeConfig(filepath.Join(dir, "etc-kube-flannel", filepath.Base(FlannelNetConfFile)), netConf)
}

func writeConfig(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// flannelManifest is the file flannel's RBAC is applied from.
func (p Paths) flannelManifest() string { return filepath.Join(p.Root, "flannel-rbac.json") }

// FlannelLease is the host path of a node's flannel lease file.
func (p Paths) FlannelLease(node string) string {
	return filepath.Join(p.Node(node), "run-flannel", filepath.Base(FlannelSubnetFile))
}

// startFlannel grants flanneld its API rights, waits until
// kube-controller-manager has given every node its pod CIDR, starts flanneld
// on every node and waits for every node's lease file.
func (l *Lab) startFlannel(ctx context.Context, st *State) error {
	fl := st.Flannel
	rbac, err := render.FlannelRBAC()
	if err != nil {
		return err
	}
	if err := writeConfig(l.paths.flannelManifest(), rbac); err != nil {
		return err
	}
	if _, err := l.kubectl(ctx, st.BinDir, "apply", "-f", l.paths.flannelManifest()); err != nil {
		return fmt.Errorf("apply flannel RBAC: %w", err)
	}
	l.step("waiting for kube-controller-manager to allocate the nodes' pod CIDRs")
	if err := l.waitPodCIDRs(ctx, st.BinDir); err != nil {
		return err
	}
	l.step("flanneld %s on %d nodes (VXLAN %s)", fl.Version, len(l.plan.Nodes), FlannelDevice)
	for _, m := range l.plan.Nodes {
		s := l.spec(m.Name+"-flanneld", l.nodeCgroup(m), "", filepath.Join(fl.BinDir, "flanneld"),
			"--kubeconfig-file="+filepath.Join(l.paths.Node(m.Name), "flanneld.kubeconfig"),
			"--iface=eth0", "--ip-masq", "--v=1")
		s.Env = []string{"NODE_NAME=" + m.Name}
		s.JoinPID = l.holder(m.Name)
		if s.JoinPID == 0 {
			return fmt.Errorf("%s: no namespace holder", m.Name)
		}
		if _, err := l.start(s); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, flannelTimeout)
	defer cancel()
	for _, m := range l.plan.Nodes {
		if err := l.waitFile(ctx, l.paths.FlannelLease(m.Name)); err != nil {
			return fmt.Errorf("%s: flannel lease: %w; see %s", m.Name, err, l.paths.Log(m.Name+"-flanneld"))
		}
	}
	return nil
}

// waitPodCIDRs waits until every planned node is registered with a pod CIDR.
func (l *Lab) waitPodCIDRs(ctx context.Context, bin string) error {
	var last []NodeStatus
	for {
		if err := l.exited(); err != nil {
			return err
		}
		if st, err := l.nodeStatuses(ctx, bin); err == nil {
			last = st
			n := 0
			for _, s := range st {
				if _, ok := l.plan.Node(s.Name); ok && s.PodCIDR != "" {
					n++
				}
			}
			if n == len(l.plan.Nodes) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes without a pod CIDR (%v): %w; see %s", last, ctx.Err(), l.paths.Log("kube-controller-manager"))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitFile waits until path exists, failing fast when a lab process exits.
func (l *Lab) waitFile(ctx context.Context, path string) error {
	for {
		if err := l.exited(); err != nil {
			return err
		}
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stat %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never appeared: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// podRanges is the cluster pod range of every family, first family first.
func (p *Plan) podRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range p.Stacks() {
		out = append(out, s.Pods)
	}
	return out
}
