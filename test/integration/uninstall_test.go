//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/nodesnap"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// snapshotOf takes a snapshot of the fake host namespace and dirs.
func snapshotOf(t *testing.T, host string, o nodesnap.Options) nodesnap.Snapshot {
	t.Helper()
	run := func(ctx context.Context, argv ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", filepath.Base(host)}, argv...)...).Output() // #nosec G204 -- test
		return string(out), err
	}
	s, err := nodesnap.Take(bg(), run, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUninstallRestoresTheNode: a node that had its own portmap plugin runs
// the daemon with a pod, the fast path and the overlay; the daemon stops
// (as on every restart) and Uninstall runs. The node's links, addresses,
// rules, routes, neighbours, FDB, nft tables, qdiscs, sysctls and the CNI,
// routing-table, state and socket directories must then equal what they
// were before the daemon first started, the node's portmap back in place;
// Uninstall again changes nothing, and the daemon installs again.
func TestUninstallRestoresTheNode(t *testing.T) {
	requirements(t)
	cfg, k8s := startAPIServer(t, true)
	startManager(t, cfg, k8s.Scheme())
	overlay(t, k8s, "un-overlay", "10.203.0.0/24")

	dir := t.TempDir()
	n := &node{k8s: k8s, host: fakeHost(t), health: freeAddr(t)}
	// The tunnel's parent is the link of the default route, and the node
	// publishes its tunnel endpoint on its Node.
	ipCmd(t, n.host, "route", "add", "default", "via", "10.99.0.254", "dev", "lan0")
	nodeObj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := k8s.Create(bg(), nodeObj); err != nil {
		t.Fatal(err)
	}
	nodeObj.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.99.0.1"}}
	if err := k8s.Status().Update(bg(), nodeObj); err != nil {
		t.Fatal(err)
	}
	binDir, confDir, rtDir := filepath.Join(dir, "opt/cni/bin"), filepath.Join(dir, "etc/cni/net.d"), filepath.Join(dir, "rt_tables.d")
	for _, d := range []string{binDir, confDir, rtDir, filepath.Join(dir, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, content string) {
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil { // #nosec G306 -- a plugin binary
			t.Fatal(err)
		}
	}
	write(filepath.Join(binDir, "portmap"), "the node's own portmap\n")
	write(filepath.Join(dir, "src/portmap"), "estuary's portmap\n")
	write(filepath.Join(dir, "src/loopback"), "estuary's loopback\n")
	n.cfg = daemon.Config{
		NodeName: nodeName, Kube: cfg,
		SocketPath: filepath.Join(dir, "run", "cni.sock"), StatePath: filepath.Join(dir, "lib", "state.db"),
		CNIBinDir: binDir, CNIConfDir: confDir, RTTablesDir: rtDir,
		CNIBinarySource: buildCNI(t),
		CNIExtraPlugins: []string{filepath.Join(dir, "src/portmap"), filepath.Join(dir, "src/loopback")},
		Bandwidth:       daemon.BandwidthOff,
		AddressTimeout:  addressTimeout, HostNetns: n.host, HealthAddr: n.health, FastPath: true,
	}
	opts := nodesnap.Options{
		Paths:   []string{binDir, confDir, rtDir, filepath.Dir(n.cfg.StatePath), filepath.Dir(n.cfg.SocketPath)},
		Sysctls: `^net\.(ipv4\.(ip_forward|conf\.(all|default|lan0)\.)|ipv6\.conf\.(all|default|lan0)\.|netfilter\.nf_conntrack_tcp_be_liberal)`,
	}
	// An IPv6 address gets its local route once duplicate address detection
	// is done: the snapshot is of a settled node.
	testenv.Eventually(t, "no tentative IPv6 address in the fake host", 10*time.Second, func() error {
		if out := ipCmd(t, n.host, "-6", "addr", "show", "tentative"); strings.TrimSpace(out) != "" {
			return fmt.Errorf("tentative: %s", out)
		}
		return nil
	})
	before := snapshotOf(t, n.host, opts)

	n.stop = startDaemon(t, n.cfg)
	n.plumbOnePod(t, "uninstall-0", "it-uninstall-1")
	during := nodesnap.Diff(before, snapshotOf(t, n.host, opts))
	for _, want := range []string{"links: + estvx4", "/" + daemon.ConflistName, "ip_forward = 1", "rules4: + "} {
		if !containsLine(during, want) {
			t.Fatalf("the snapshot of the running node shows no %q; it differs from before by:\n%s", want, strings.Join(during, "\n"))
		}
	}
	if err := n.stop(); err != nil {
		t.Fatalf("daemon stop: %v", err)
	}
	if kept := nodesnap.Diff(before, snapshotOf(t, n.host, opts)); !containsLine(kept, "links: + estvx4") {
		t.Fatalf("a stopped daemon took its data path down; the node differs from before by:\n%s", strings.Join(kept, "\n"))
	}

	r, err := daemon.Uninstall(bg(), n.cfg)
	if err != nil {
		t.Fatalf("Uninstall: %v (%s)", err, r)
	}
	t.Logf("uninstall: %s", r)
	if d := nodesnap.Diff(before, snapshotOf(t, n.host, opts)); len(d) > 0 {
		t.Fatalf("after Uninstall the node differs from before the install:\n%s", strings.Join(d, "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(binDir, "portmap")); err != nil || string(b) != "the node's own portmap\n" {
		t.Fatalf("the node's portmap = %q, %v; want it restored", b, err)
	}
	again, err := daemon.Uninstall(bg(), n.cfg)
	if err != nil || len(again.Links) > 0 || again.KernelObjects > 0 || len(again.Files) > 0 {
		t.Fatalf("a second Uninstall = %s, %v; want nothing done", again, err)
	}

	n.stop = startDaemon(t, n.cfg)
	n.plumbOnePod(t, "uninstall-1", "it-uninstall-2")
}

// plumbOnePod creates a pod, ADDs it through the installed plugin and
// checks the fake host reaches it.
func (n *node) plumbOnePod(t *testing.T, name, id string) {
	t.Helper()
	n.readInstalled(t)
	p := newPod(t, n.k8s, name)
	ipi := boundAddress(t, n.k8s, p)
	podNS := nstest.New(t)
	n.call("ADD", id, podNS, p).run(t).ok(t, "ADD")
	want := strings.Split(ipi.Spec.Address.IP, "/")[0]
	contains(t, "pod addresses", ipCmd(t, podNS, "-o", "addr", "show", "dev", "eth0"), "inet "+want+"/")
}

// readInstalled reads the installed plugin's path and its conflist entry.
func (n *node) readInstalled(t *testing.T) {
	t.Helper()
	n.bin = filepath.Join(n.cfg.CNIBinDir, daemon.PluginType)
	raw, err := os.ReadFile(filepath.Join(n.cfg.CNIConfDir, daemon.ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	var list daemon.Conflist
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("conflist %s: %v", raw, err)
	}
	if n.stdin, err = list.PluginConfig("estuary"); err != nil {
		t.Fatal(err)
	}
}

func containsLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}
