//go:build lab

package flannellab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

const nodes = 3

type env struct {
	repo, bin, state, apiPort, kubeCache string
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func setup(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the flannel lab needs root (network namespaces, mounts, cgroups)")
	}
	repo, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{repo: repo, bin: filepath.Join(dir, "estuary-lab"), kubeCache: filepath.Join(dir, "kubectl-cache"),
		state:   getenv("ESTUARY_FLANNEL_LAB_STATE", "/tmp/lab-flannel"),
		apiPort: getenv("ESTUARY_FLANNEL_LAB_API_PORT", "16447")}
	build := exec.Command("go", "build", "-o", e.bin, "./cmd/estuary-lab")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build estuary-lab: %v\n%s", err, out)
	}
	return e
}

func (e *env) lab(ctx context.Context, a ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.bin, append([]string{"--state-dir", e.state}, a...)...)
	cmd.Dir = e.repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("estuary-lab %s: %w\n%s", strings.Join(a, " "), err, out)
	}
	return string(out), nil
}

// node runs a command in a lab node (its network, mount and UTS namespaces).
func (e *env) node(ctx context.Context, name string, a ...string) (string, error) {
	return e.lab(ctx, append([]string{"exec", name, "--"}, a...)...)
}

func (e *env) kubectl(ctx context.Context, a ...string) (string, error) {
	return e.kubectlStdin(ctx, "", a...)
}

func (e *env) kubectlStdin(ctx context.Context, stdin string, a ...string) (string, error) {
	var st struct{ BinDir string }
	b, err := os.ReadFile(filepath.Join(e.state, "state.json"))
	if err != nil {
		return "", fmt.Errorf("lab state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return "", fmt.Errorf("lab state: %w", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(st.BinDir, "kubectl"), append([]string{ //nolint:gosec // G204: the lab's kubectl
		"--kubeconfig", filepath.Join(e.state, "kubeconfig"), "--cache-dir", e.kubeCache}, a...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(a, " "), err, out)
	}
	return string(out), nil
}

// eventually retries f every half second until it succeeds or timeout passes.
func eventually(t *testing.T, what string, timeout time.Duration, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = f(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %s: %v", what, timeout, err)
}

func TestFlannelLab(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	mode := getenv("ESTUARY_LAB_PROXY_MODE", "iptables") // flannel's rules follow it (EnableNFTables)
	out, err := e.lab(ctx, "up", "--cni", "flannel", "--nodes", fmt.Sprint(nodes), "--proxy-mode", mode,
		"--api-port", e.apiPort, "--repo", e.repo)
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer dcancel()
		if out, err := e.lab(dctx, "down"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up --cni flannel --nodes %d took %s:\n%s", nodes, time.Since(start).Round(time.Second), out)

	st := e.status(t)
	var names []string
	for _, n := range st.Nodes {
		names = append(names, n.Name)
	}
	leases := map[string]lease{}
	t.Run("leases", func(t *testing.T) { leases = checkLeases(t, e, st) })
	if t.Failed() {
		return
	}
	t.Run("kernel", func(t *testing.T) { checkKernel(t, e, st, leases) })
	t.Run("traffic rules", func(t *testing.T) { checkRules(t, e, st, mode) })
	t.Run("pods", func(t *testing.T) { checkPods(t, e, names, leases) })
}

func (e *env) status(t *testing.T) *lab.Status {
	t.Helper()
	out, err := exec.Command(e.bin, "--state-dir", e.state, "status", "-o", "json").Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var s lab.Status
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("parse status: %v", err)
	}
	if s.Phase != "running" || s.CNI != "flannel" || len(s.Nodes) != nodes {
		t.Fatalf("status: phase %s, cni %s, %d nodes", s.Phase, s.CNI, len(s.Nodes))
	}
	return &s
}

// lease is one node's flannel lease, as flanneld wrote it and the Node records it.
type lease struct {
	subnet  netip.Prefix // FLANNEL_SUBNET, the node's pod CIDR
	gateway netip.Addr   // FLANNEL_SUBNET's address: the bridge's
	mtu     string
	vtepMAC string // from the Node's backend-data annotation
	addr    string // the node's public-ip annotation
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			out[k] = v
		}
	}
	return out, sc.Err()
}

// checkLeases: every Node has a pod CIDR from kube-controller-manager, and
// flanneld recorded it in the node's subnet.env and in the Node's
// annotations, with the node's switch address as its VTEP address.
func checkLeases(t *testing.T, e *env, st *lab.Status) map[string]lease {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.kubectl(ctx, "get", "nodes", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name        string
				Annotations map[string]string
			}
			Spec struct{ PodCIDR string }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, n := range st.Nodes {
		addrs[n.Name] = n.Address
	}
	leases := map[string]lease{}
	for _, n := range list.Items {
		name, ann := n.Metadata.Name, n.Metadata.Annotations
		env, err := readEnv(filepath.Join(e.state, "nodes", name, "run-flannel", "subnet.env"))
		if err != nil {
			t.Fatalf("%s: subnet.env: %v", name, err)
		}
		sub, err := netip.ParsePrefix(env["FLANNEL_SUBNET"])
		if err != nil {
			t.Fatalf("%s: FLANNEL_SUBNET %q: %v", name, env["FLANNEL_SUBNET"], err)
		}
		if sub.Masked().String() != n.Spec.PodCIDR {
			t.Errorf("%s: FLANNEL_SUBNET %s, node podCIDR %q", name, sub, n.Spec.PodCIDR)
		}
		if env["FLANNEL_NETWORK"] != st.PodCIDR || env["FLANNEL_MTU"] != "1450" || env["FLANNEL_IPMASQ"] != "true" {
			t.Errorf("%s: subnet.env %v, want network %s, MTU 1450 (1500 - 50 of VXLAN), ipmasq", name, env, st.PodCIDR)
		}
		const prefix = "flannel.alpha.coreos.com/"
		if ann[prefix+"backend-type"] != "vxlan" || ann[prefix+"public-ip"] != addrs[name] {
			t.Errorf("%s: flannel annotations %v, want backend vxlan and public-ip %s", name, ann, addrs[name])
		}
		var data struct {
			VNI     int
			VtepMAC string
		}
		if err := json.Unmarshal([]byte(ann[prefix+"backend-data"]), &data); err != nil || data.VNI != 1 || data.VtepMAC == "" {
			t.Errorf("%s: backend-data %q: want VNI 1 and a VTEP MAC (%v)", name, ann[prefix+"backend-data"], err)
		}
		leases[name] = lease{subnet: sub.Masked(), gateway: sub.Addr(), mtu: env["FLANNEL_MTU"], vtepMAC: data.VtepMAC, addr: addrs[name]}
	}
	if len(leases) != nodes {
		t.Fatalf("%d leases, want %d", len(leases), nodes)
	}
	return leases
}

// checkKernel: every node has flannel.1 (VXLAN id 1 over eth0) with the
// VTEP MAC it announced, and for every other node an FDB entry (its VTEP MAC
// to its address), a neighbour entry (its subnet's first address to its VTEP
// MAC) and a route to its pod CIDR through flannel.1.
func checkKernel(t *testing.T, e *env, st *lab.Status, leases map[string]lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range st.Nodes {
		me := leases[n.Name]
		link, err := e.node(ctx, n.Name, "ip", "-d", "link", "show", lab.FlannelDevice)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		if !strings.Contains(link, "vxlan id 1 ") || !strings.Contains(link, "link/ether "+me.vtepMAC) ||
			!strings.Contains(link, "mtu 1450") {
			t.Errorf("%s: %s is not VXLAN id 1 with MAC %s and MTU 1450:\n%s", n.Name, lab.FlannelDevice, me.vtepMAC, link)
		}
		fdb, err := e.node(ctx, n.Name, "bridge", "fdb", "show", "dev", lab.FlannelDevice)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		neigh, err := e.node(ctx, n.Name, "ip", "neigh", "show", "dev", lab.FlannelDevice)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		routes, err := e.node(ctx, n.Name, "ip", "route", "show", "dev", lab.FlannelDevice)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		t.Logf("%s:\n%s\nFDB:\n%s\nneighbours:\n%s\nroutes:\n%s", n.Name, link, fdb, neigh, routes)
		for other, l := range leases {
			if other == n.Name {
				continue
			}
			if !hasLine(fdb, l.vtepMAC, "dst "+l.addr) {
				t.Errorf("%s: no FDB entry %s dst %s (%s)", n.Name, l.vtepMAC, l.addr, other)
			}
			if !hasLine(neigh, l.subnet.Addr().String()+" ", "lladdr "+l.vtepMAC) {
				t.Errorf("%s: no neighbour %s lladdr %s (%s)", n.Name, l.subnet.Addr(), l.vtepMAC, other)
			}
			if !hasLine(routes, l.subnet.String()+" via "+l.subnet.Addr().String()) {
				t.Errorf("%s: no route %s via %s dev %s (%s)", n.Name, l.subnet, l.subnet.Addr(), lab.FlannelDevice, other)
			}
		}
	}
}

// hasLine reports whether one line of out contains every part.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// checkRules: flannel's masquerade and forward rules are on every node, in
// iptables or, with kube-proxy in nftables mode, in flannel's nftables tables.
func checkRules(t *testing.T, e *env, st *lab.Status, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range st.Nodes {
		var out string
		var err error
		var want []string
		if mode == "nftables" {
			out, err = e.node(ctx, n.Name, "nft", "list", "ruleset")
			want = []string{"table ip flannel-ipv4", "masquerade"}
		} else {
			out, err = e.node(ctx, n.Name, "iptables-save")
			want = []string{"-A FLANNEL-POSTRTG", "MASQUERADE", "-A FLANNEL-FWD -s " + st.PodCIDR}
		}
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in flannel's %s rules", n.Name, w, mode)
			}
		}
	}
}
