package netmodel

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

func network(name string, typ estuaryv1.NetworkType, netID int64) estuaryv1.Network {
	return estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: typ, NetID: &netID}}
}

func TestOverlayNetworkAndVNI(t *testing.T) {
	if _, ok := OverlayNetwork([]estuaryv1.Network{network("rack1", estuaryv1.NetworkTypeUnderlay, 0)}); ok {
		t.Fatal("an Underlay network was taken for the overlay")
	}
	got, ok := OverlayNetwork([]estuaryv1.Network{network("zz", estuaryv1.NetworkTypeOverlay, 9),
		network("overlay", estuaryv1.NetworkTypeOverlay, 4)})
	if !ok || got.Name != "overlay" || VNI(&got.Spec) != 4 {
		t.Fatalf("overlay = %s (VNI %d), %v; want overlay, VNI 4", got.Name, VNI(&got.Spec), ok)
	}
	if v := VNI(&estuaryv1.NetworkSpec{}); v != DefaultVNI {
		t.Fatalf("VNI without netID = %d, want %d", v, DefaultVNI)
	}
	deleting := network("a", estuaryv1.NetworkTypeOverlay, 5)
	deleting.DeletionTimestamp = &metav1.Time{}
	if got, _ := OverlayNetwork([]estuaryv1.Network{deleting, network("b", estuaryv1.NetworkTypeOverlay, 6)}); got.Name != "b" {
		t.Fatalf("overlay = %q; a network being deleted is not the overlay", got.Name)
	}
}

// The manager records, and the daemon programs, the same identifier: an
// Overlay network without netID records DefaultVNI.
func TestNetIDAgreesWithTheDataPath(t *testing.T) {
	ovl := estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay}
	if got := NetID(&ovl, &estuaryv1.SubnetSpec{}); got == nil || *got != int64(VNI(&ovl)) {
		t.Errorf("NetID of an Overlay network without netID = %v, want its VNI %d", got, VNI(&ovl))
	}
	vlan := estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, NetID: ptr.To[int64](100)}
	if got := NetID(&vlan, &estuaryv1.SubnetSpec{NetID: ptr.To[int64](200)}); got == nil || *got != 200 {
		t.Errorf("NetID with a subnet override = %v, want 200", got)
	}
	if got := NetID(&vlan, nil); got == nil || *got != 100 {
		t.Errorf("NetID of a VLAN network = %v, want 100", got)
	}
	if got := NetID(&estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay}, nil); got != nil {
		t.Errorf("NetID of an Underlay network without netID = %d, want none", *got)
	}
	if got := NetID(nil, nil); got != nil {
		t.Errorf("NetID of an unknown network = %d, want none", *got)
	}
}

func TestModeAndNATDefaults(t *testing.T) {
	for _, c := range []struct {
		spec estuaryv1.NetworkSpec
		want estuaryv1.NetworkMode
	}{
		{estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay}, estuaryv1.NetworkModeVXLAN},
		{estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay}, estuaryv1.NetworkModeVLAN},
		{estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP}, estuaryv1.NetworkModeBGP},
	} {
		if got := Mode(&c.spec); got != c.want {
			t.Errorf("Mode(%+v) = %s, want %s", c.spec, got, c.want)
		}
	}
	unset := &estuaryv1.SubnetSpec{}
	if !NATOutgoing(estuaryv1.NetworkTypeOverlay, unset) || NATOutgoing(estuaryv1.NetworkTypeUnderlay, unset) {
		t.Error("natOutgoing unset: want on for Overlay, off for Underlay")
	}
	off, on := &estuaryv1.SubnetSpec{NATOutgoing: ptr.To(false)}, &estuaryv1.SubnetSpec{NATOutgoing: ptr.To(true)}
	if NATOutgoing(estuaryv1.NetworkTypeOverlay, off) || !NATOutgoing(estuaryv1.NetworkTypeUnderlay, on) {
		t.Error("natOutgoing set: the subnet's value wins")
	}
	if asn, ok := ASN(&estuaryv1.NetworkSpec{NetID: ptr.To[int64](1 << 32)}); ok {
		t.Errorf("ASN 2^32 accepted as %d", asn)
	}
}

func TestAttachedAndSubnetFamily(t *testing.T) {
	u := network("u", estuaryv1.NetworkTypeUnderlay, 0)
	u.Spec.NodeSelector = map[string]string{"rack": "r1"}
	if !Attached(&u, map[string]string{"rack": "r1", "x": "y"}) || Attached(&u, map[string]string{"rack": "r2"}) {
		t.Error("an Underlay network reaches exactly the nodes its selector matches")
	}
	o := network("o", estuaryv1.NetworkTypeOverlay, 0)
	if !Attached(&o, nil) || DomainSelector(&o) != nil {
		t.Error("the Overlay network reaches every node and adds no domain")
	}
	if got := SelectorString(map[string]string{"b": "2", "a": "1"}); got != "{a=1,b=2}" {
		t.Errorf("SelectorString = %s", got)
	}
	for cidr, want := range map[string]family.Family{"10.0.0.0/24": family.IPv4, "fd00::/64": family.IPv6} {
		if got := SubnetFamily(&estuaryv1.SubnetSpec{Range: estuaryv1.AddressRange{CIDR: cidr}}); got != want {
			t.Errorf("SubnetFamily(%s) = %s, want %s", cidr, got, want)
		}
	}
	if got := SubnetFamily(&estuaryv1.SubnetSpec{Range: estuaryv1.AddressRange{CIDR: "bad", Version: 6}}); got != family.IPv6 {
		t.Errorf("SubnetFamily of an unparsable IPv6 subnet = %s", got)
	}
}
