package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/uplink"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// namedLinks resolves the links it holds by name.
type namedLinks map[string]overlay.Parent

func (l namedLinks) ResolveParent(spec overlay.ParentSpec) (overlay.Parent, error) {
	p, ok := l[spec.Name]
	if !ok {
		return overlay.Parent{}, fmt.Errorf("no link %q", spec.Name)
	}
	return p, nil
}

// TestUnderlayChoosesUplinkPerMode: with Choose, VLAN networks use the
// VLAN choice and BGP networks the BGP choice, with both links' addresses;
// a mode whose choice fails has its networks left out of the applied
// input (not programmed on another link) and the pass reports why, while
// the other mode is still applied.
func TestUnderlayChoosesUplinkPerMode(t *testing.T) {
	r1 := map[string]string{"rack": "r1"}
	self := objtest.Labelled(objtest.Node("node-1", "", "", "10.77.0.11"), r1)
	links := namedLinks{
		"eth0":  {Link: "eth0", IP: netip.MustParseAddr("10.77.0.11"), Prefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.11/24")}},
		"bond0": {Link: "bond0", IP: netip.MustParseAddr("10.88.0.11"), Prefixes: []netip.Prefix{netip.MustParsePrefix("10.88.0.11/24")}},
	}
	choice := map[uplink.Mode]string{uplink.VLAN: "eth0", uplink.BGP: "bond0"}
	var missing error
	choose := func(m uplink.Mode) (string, error) {
		if m == uplink.BGP && missing != nil {
			return "", missing
		}
		return choice[m], nil
	}
	fu := &fakeUnderlay{}
	s := NewUnderlayPart(UnderlayConfig{Node: "node-1", Links: links, Choose: choose, Log: logr.Discard()}, fu)
	objs := translate.Objects{
		Networks: []estuaryv1.Network{objtest.UnderlayNet("vlan", estuaryv1.NetworkModeVLAN, 0, r1), objtest.BGPNet("fabric", 65010, r1, "10.88.0.1")},
		Subnets: []estuaryv1.Subnet{objtest.Subnet("vlan-a", "vlan", "192.168.10.0/24", nil),
			objtest.Subnet("fabric-a", "fabric", "10.90.0.0/24", nil)},
	}
	pods := objtest.Addrs("192.168.10.5", "10.90.0.9")
	parent := func() (overlay.Parent, error) { return links["eth0"], nil }
	if err := syncUnderlayOf(s, &self, objs, pods, parent); err != nil {
		t.Fatal(err)
	}
	in, _ := fu.last()
	if in.Uplink != "eth0" || in.BGPUplink != "bond0" || len(in.Networks) != 2 || len(in.NodeAddrs) != 2 {
		t.Fatalf("applied uplink %q, BGP uplink %q, %d networks, node addresses %v; want eth0, bond0, 2, one on each",
			in.Uplink, in.BGPUplink, len(in.Networks), in.NodeAddrs)
	}

	missing = errors.New("no bgp candidate link exists on node node-1: tried ens5f0")
	err := syncUnderlayOf(s, &self, objs, pods, parent)
	if err == nil || !strings.Contains(err.Error(), "ens5f0") {
		t.Fatalf("pass with no BGP uplink: %v, want the missing candidates reported", err)
	}
	in, _ = fu.last()
	if len(in.Networks) != 1 || in.Networks[0].Name != "vlan" || in.BGPUplink != "" {
		t.Fatalf("applied %d networks (%+v), BGP uplink %q; want the VLAN network alone", len(in.Networks), in.Networks, in.BGPUplink)
	}

	// With only the BGP network on the node, nothing is applied once the
	// empty input was, and every pass still reports the missing uplink.
	bgpOnly := objs
	bgpOnly.Networks = objs.Networks[1:]
	for i := range 2 {
		if err := syncUnderlayOf(s, &self, bgpOnly, pods, parent); err == nil || !strings.Contains(err.Error(), "ens5f0") {
			t.Fatalf("pass %d with the BGP network alone and no BGP uplink: %v, want the missing candidates reported", i+1, err)
		}
	}
	if in, _ = fu.last(); len(in.Networks) != 0 {
		t.Fatalf("applied %+v, want no network", in.Networks)
	}
}
