package lab

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestDualPlanPairsEveryAddressWithItsIPv6Twin(t *testing.T) {
	p, err := NewFamilyPlan(MaxNodes, FamilyDual)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stacks()) != 2 || p.IPv6() || !p.Secondary.IPv6() {
		t.Fatalf("dual plan stacks: first IPv6 %v, second %v", p.IPv6(), p.Secondary)
	}
	s := p.Secondary
	for name, got := range map[string]netip.Addr{
		"router": s.Router.Addr, "control plane": s.ControlPlane.Addr, "router external": s.RouterExt,
		"external": s.External.Addr, "underlay gateway": s.RouterUnder, "API service": s.APIService, "DNS service": s.DNSService,
	} {
		want := map[string]string{"router": "fd77::1", "control plane": "fd77::2", "router external": "fd77:250::1",
			"external": "fd77:250::10", "underlay gateway": "fd77:100::1", "API service": "fd79::1", "DNS service": "fd79::10"}[name]
		if got.String() != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	seen := map[netip.Addr]string{}
	for i, m := range s.Nodes {
		if m.NetNS != p.Nodes[i].NetNS || m.Name != p.Nodes[i].Name {
			t.Errorf("IPv6 member %d is %s in %s, IPv4 one %s in %s", i, m.Name, m.NetNS, p.Nodes[i].Name, p.Nodes[i].NetNS)
		}
		if !s.Switch.Contains(m.Addr) || !s.Pods.Contains(m.PodCIDR.Addr()) || m.PodCIDR.Bits() != 64 {
			t.Errorf("%s: %s, pods %s outside %s / %s", m.Name, m.Addr, m.PodCIDR, s.Switch, s.Pods)
		}
		if m.PodCIDR.Overlaps(s.OverlaySubnet()) {
			t.Errorf("%s pod CIDR %s overlaps estuary's overlay subnet %s", m.Name, m.PodCIDR, s.OverlaySubnet())
		}
		if other, dup := seen[m.Addr]; dup {
			t.Errorf("%s and %s share %s", m.Name, other, m.Addr)
		}
		seen[m.Addr] = m.Name
	}
	if got := p.NodeIPs("node-1"); len(got) != 2 || got[0].String() != "10.77.0.11" || got[1].String() != "fd77::11" {
		t.Errorf("node-1 addresses %v, want [10.77.0.11 fd77::11]", got)
	}
	if got := p.nodeIPFlag("node-3"); got != "10.77.0.13,fd77::13" {
		t.Errorf("kubelet --node-ip %q", got)
	}
	if got := p.joined(func(x *Plan) string { return x.Services.String() }); got != "10.79.0.0/16,fd79::/112" {
		t.Errorf("service ranges %q", got)
	}
	if got := p.NodePodCIDRs("node-2"); len(got) != 2 || got[1].String() != "fd78:0:0:2::/64" {
		t.Errorf("node-2 pod CIDRs %v", got)
	}
	if s.OverlaySubnet().String() != "fd78::/64" || p.OverlaySubnet().String() != "10.78.0.0/16" {
		t.Errorf("overlay subnets %s, %s", p.OverlaySubnet(), s.OverlaySubnet())
	}
	if p.anyAddr() != "::" {
		t.Errorf("a dual lab's servers bind %s, want ::", p.anyAddr())
	}
}

func TestIPv6PlanHasOnlyIPv6(t *testing.T) {
	p, err := NewFamilyPlan(3, FamilyIPv6)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stacks()) != 1 || !p.IPv6() {
		t.Fatalf("IPv6 plan: %d stacks, IPv6 %v", len(p.Stacks()), p.IPv6())
	}
	for _, m := range p.Members() {
		if !m.Addr.Is6() {
			t.Errorf("%s has IPv4 address %s in an IPv6-only lab", m.Name, m.Addr)
		}
	}
	if got := p.APIServerURL(); got != "https://[fd77::2]:6443" {
		t.Errorf("API server URL %s", got)
	}
	if got := p.nodeIPFlag("node-1"); got != "fd77::11" {
		t.Errorf("kubelet --node-ip %q", got)
	}
}

func TestFamilyIsValidated(t *testing.T) {
	for _, f := range []string{"v6", "IPv6", "dualstack"} {
		if _, err := NewFamilyPlan(3, f); err == nil || !strings.Contains(err.Error(), "--ip-family") {
			t.Errorf("family %q: err %v, want one naming --ip-family", f, err)
		}
	}
	if _, err := New(Options{StateDir: t.TempDir(), IPFamily: "v4"}); err == nil {
		t.Error("New accepted --ip-family v4")
	}
}

func TestEstuaryValuesDualStack(t *testing.T) {
	plan, err := NewFamilyPlan(2, FamilyDual)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EstuaryValues(plan)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Manager        struct{ DefaultIPFamily string } `json:"manager"`
		DefaultNetwork struct {
			Subnets []struct{ Name, CIDR string }
		} `json:"defaultNetwork"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, s := range v.DefaultNetwork.Subnets {
		got = append(got, s.Name+"="+s.CIDR)
	}
	if strings.Join(got, " ") != "overlay-v4=10.78.0.0/16 overlay-v6=fd78::/64" || v.Manager.DefaultIPFamily != "Network" {
		t.Errorf("dual values: subnets %v, defaultIPFamily %q\n%s", got, v.Manager.DefaultIPFamily, b)
	}
	if objs := plan.defaultNetworkObjects(); len(objs) != 3 || objs[2] != "subnets.networking.estuary.io/overlay-v6" {
		t.Errorf("default network objects %v", objs)
	}
}

func TestPodCIDRPatchListsEveryFamily(t *testing.T) {
	p, err := NewFamilyPlan(2, FamilyDual)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := p.Node("node-2")
	var got struct {
		Spec struct {
			PodCIDR  string   `json:"podCIDR"`
			PodCIDRs []string `json:"podCIDRs"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(podCIDRPatch(m.PodCIDR, p.NodePodCIDRs("node-2"))), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.PodCIDR != "10.78.2.0/24" || strings.Join(got.Spec.PodCIDRs, ",") != "10.78.2.0/24,fd78:0:0:2::/64" {
		t.Errorf("patch %+v", got)
	}
}

func TestRegistryHostsTOMLNamesTheLabAddress(t *testing.T) {
	got := registryHostsTOML("http://[fd77::2]:5000")
	want := "server = \"http://[fd77::2]:5000\"\n\nhost = { \"http://[fd77::2]:5000\" = { capabilities = [\"pull\", \"resolve\"] } }\n"
	if got != want {
		t.Errorf("hosts.toml:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "[host.") {
		t.Error("hosts.toml has a table header keyed by an address, which containerd 1.6 refuses for IPv6")
	}
}
