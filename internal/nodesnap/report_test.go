package nodesnap

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// TestCollectReadsANamespacesState builds, in a network namespace of its
// own, what the daemon makes on a node (an uplink (one end of a veth pair), the VXLAN tunnel, a pod
// route in table 1000 and its rule, a permanent neighbour and FDB entry on
// the tunnel, a clsact BPF filter as the fast path's, estuary's nft table, a per-link sysctl) and
// checks that Collect reads each into its section, reads only that
// namespace, and records a failing source without losing the others.
func TestCollectReadsANamespacesState(t *testing.T) {
	ns := nstest.New(t)
	for _, args := range [][]string{
		{"link", "add", "uplink0", "type", "veth", "peer", "name", "peer0"},
		{"addr", "add", "10.77.0.1/24", "dev", "uplink0"},
		{"link", "set", "uplink0", "up"},
		{"link", "add", "estvx4", "type", "vxlan", "id", "4", "dstport", "4789", "local", "10.77.0.1", "dev", "uplink0", "nolearning"},
		{"link", "set", "estvx4", "up"},
		{"route", "add", "10.244.0.5/32", "dev", "uplink0", "table", "1000", "proto", "229", "scope", "link"},
		{"rule", "add", "pref", "1000", "lookup", "1000"},
		{"neigh", "add", "10.244.1.1", "lladdr", "02:00:00:00:00:01", "dev", "estvx4", "nud", "permanent"},
	} {
		nstest.IP(t, ns, args...)
	}
	nstest.Exec(t, ns, "bridge", "fdb", "append", "02:00:00:00:00:01", "dev", "estvx4", "dst", "10.77.0.2", "self", "permanent")
	attachBPF(t, ns, "uplink0")
	nstest.Exec(t, ns, "nft", "add table ip estuary; add chain ip estuary postrouting { type nat hook postrouting priority 100; }; "+
		"add rule ip estuary postrouting ip saddr 10.244.0.0/16 masquerade")
	nstest.Exec(t, ns, "sysctl", "-qw", "net.ipv4.conf.estvx4.forwarding=1")

	broken := errors.New("daemon not answering")
	r := Collect(context.Background(), CollectOptions{Node: "n1", Version: "test", Netns: ns, Extra: []Source{
		{Name: "endpoints", Read: func(context.Context) ([]string, error) { return nil, broken }},
		{Name: "extra", Read: func(context.Context) ([]string, error) { return []string{"kept"}, nil }},
	}})

	want := map[string][]string{
		"links":      {"estvx4 vxlan mtu 1450 state unknown flags up", "vni 4 port 4789 local 10.77.0.1 dev uplink0 learning false"},
		"addresses":  {"uplink0 inet 10.77.0.1/24 scope global"},
		"rules":      {"ipv4 1000: from all lookup 1000"},
		"routes":     {"table 1000 ipv4 10.244.0.5/32 dev uplink0 proto estuary scope link", "table local ipv4 local 10.77.0.1/32 dev uplink0 proto kernel scope host src 10.77.0.1"},
		"neighbours": {"10.244.1.1 dev estvx4 lladdr 02:00:00:00:00:01 PERMANENT"},
		"fdb":        {"02:00:00:00:00:01 dev estvx4 dst 10.77.0.2 self NOARP,PERMANENT"},
		"tc":         {"uplink0 qdisc clsact", "uplink0 ingress filter bpf pref 229 handle 0x1 protocol 0x0003 bpf nodestate_test id "},
		"nftables":   {"table ip estuary", "table ip estuary chain postrouting type nat hook 4 prio 100", "Masq"},
		"sysctls":    {"estvx4 ipv4.conf.forwarding=1", "net.ipv4.ip_forward="},
		"extra":      {"kept"},
	}
	for name, lines := range want {
		s, ok := r.Section(name)
		if !ok {
			t.Errorf("no section %s", name)
			continue
		}
		if s.Error != "" {
			t.Errorf("section %s: %s", name, s.Error)
		}
		all := strings.Join(s.Lines, "\n")
		for _, l := range lines {
			if !strings.Contains(all, l) {
				t.Errorf("section %s has no %q:\n%s", name, l, all)
			}
		}
	}
	links, _ := r.Section("links")
	if len(links.Lines) != 4 {
		t.Errorf("links of the test namespace = %d lines, want lo, uplink0, peer0 and estvx4 only:\n%s", len(links.Lines), strings.Join(links.Lines, "\n"))
	}
	if f := r.Failed(); !slices.Equal(f, []string{"endpoints: daemon not answering"}) {
		t.Errorf("Failed() = %q, want only the endpoints source", f)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"node n1, taken ", "== routes (", "== endpoints (0)\n   ERROR: daemon not answering"} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text has no %q:\n%s", w, text.String())
		}
	}
}

// attachBPF attaches a program that passes every packet to link's ingress
// in ns, as the fast path attaches its own (ops.AttachIngress).
func attachBPF(t *testing.T, ns, link string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "nodestate_test", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatalf("load a BPF program: %v", err)
	}
	defer func() { _ = prog.Close() }()
	h, err := ops.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.TC().AttachIngress(link, prog.FD(), "nodestate_test"); err != nil {
		t.Fatal(err)
	}
}

// TestReadSysctlsMarksMissingSettings reads a /proc/sys tree made by the
// test: a link's line lists its settings, and a setting the kernel lacks
// (IPv6 off) reads "-".
func TestReadSysctlsMarksMissingSettings(t *testing.T) {
	root := t.TempDir()
	for p, v := range map[string]string{
		"net/ipv4/ip_forward":             "1\n",
		"net/ipv4/conf/eth0/forwarding":   "1\n",
		"net/ipv4/conf/eth0/rp_filter":    "2\n",
		"net/ipv4/neigh/eth0/app_solicit": "0\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lines, err := readSysctls(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(lines, "net.ipv4.ip_forward=1") || !slices.Contains(lines, "net.core.bpf_jit_enable=-") {
		t.Errorf("global lines: %q", lines)
	}
	eth0 := lines[len(lines)-1]
	for _, w := range []string{"eth0 ", "ipv4.conf.forwarding=1", "ipv4.conf.rp_filter=2", "ipv4.neigh.app_solicit=0", "ipv6.conf.forwarding=-"} {
		if !strings.Contains(eth0, w) {
			t.Errorf("eth0 line %q has no %q", eth0, w)
		}
	}
}
