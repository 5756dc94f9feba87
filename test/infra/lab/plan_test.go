package lab

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPlanAddressesAreDistinctAndInRange(t *testing.T) {
	p, err := NewPlan(MaxNodes)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]string{}
	for _, m := range p.Members() {
		if !p.Switch.Contains(m.Addr) {
			t.Errorf("%s address %s outside switch %s", m.Name, m.Addr, p.Switch)
		}
		if other, dup := seen[m.Addr]; dup {
			t.Errorf("%s and %s share %s", m.Name, other, m.Addr)
		}
		seen[m.Addr] = m.Name
	}
	for i, a := range p.Nodes {
		if !p.Pods.Contains(a.PodCIDR.Addr()) || a.PodCIDR.Bits() != 24 {
			t.Errorf("%s pod CIDR %s not a /24 of %s", a.Name, a.PodCIDR, p.Pods)
		}
		for _, b := range p.Nodes[i+1:] {
			if a.PodCIDR.Overlaps(b.PodCIDR) {
				t.Errorf("%s and %s pod CIDRs overlap", a.Name, b.Name)
			}
		}
	}
	if !p.ExternalNet.Contains(p.External.Addr) || !p.ExternalNet.Contains(p.RouterExt) {
		t.Errorf("external link addresses outside %s", p.ExternalNet)
	}
	for _, r := range []netip.Prefix{p.Switch, p.ExternalNet, p.Underlay, p.Services} {
		if r.Overlaps(p.Pods) {
			t.Errorf("%s overlaps pods %s", r, p.Pods)
		}
	}
	for _, r := range []netip.Prefix{p.Switch, p.ExternalNet} {
		if r.Overlaps(p.Underlay) {
			t.Errorf("underlay subnet %s overlaps %s", p.Underlay, r)
		}
	}
	if !p.Underlay.Contains(p.RouterUnder) || p.RouterUnder.String() != "10.77.100.1" {
		t.Errorf("router underlay gateway %s, want 10.77.100.1 in %s", p.RouterUnder, p.Underlay)
	}
	if p.APIService.String() != "10.79.0.1" {
		t.Errorf("API service address %s", p.APIService)
	}
}

func TestPlanRejectsBadNodeCounts(t *testing.T) {
	for _, n := range []int{0, -1, MaxNodes + 1} {
		if _, err := NewPlan(n); err == nil {
			t.Errorf("NewPlan(%d) succeeded", n)
		}
	}
}

func TestEveryNameCarriesThePrefix(t *testing.T) {
	p, _ := NewPlan(MaxNodes)
	for _, ns := range p.namespaces() {
		if !strings.HasPrefix(ns, Prefix+"-") {
			t.Errorf("namespace %s lacks prefix %s", ns, Prefix)
		}
	}
	for _, m := range p.Members() {
		if !strings.HasPrefix(m.Port, Prefix) || len(m.Port) > 15 {
			t.Errorf("switch port %q lacks prefix or exceeds 15 characters", m.Port)
		}
	}
	if c := cgroupOf("node-1/system"); !strings.HasPrefix(c, Prefix+"/") {
		t.Errorf("cgroup %s outside %s", c, Prefix)
	}
}

func TestMountsUnderMatchesWholeComponents(t *testing.T) {
	dir := t.TempDir()
	info := dir + "/mountinfo"
	content := "1 0 0:1 / /var/lib/lab rw - ext4 x rw\n" +
		"2 1 0:2 / /var/lib/lab/nodes/n1/a rw - ext4 x rw\n" +
		"3 1 0:3 / /var/lib/lab2/x rw - ext4 x rw\n" +
		"4 1 0:4 / /run/netns/estlab-cp rw - nsfs x rw\n"
	if err := writeFile(info, content); err != nil {
		t.Fatal(err)
	}
	got := mountsUnder("/var/lib/lab/", info)
	if len(got) != 1 || got[0] != "/var/lib/lab/nodes/n1/a" {
		t.Errorf("mountsUnder state dir = %v", got)
	}
	if got := mountsUnder("/var/run/netns/"+Prefix, info); len(got) != 1 {
		t.Errorf("mountsUnder netns = %v", got)
	}
}
