package nodelabel

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

func TestDesiredAndChanges(t *testing.T) {
	nets := []estuaryv1.Network{
		{ObjectMeta: metav1.ObjectMeta{Name: "ov"}, Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay}},
		{ObjectMeta: metav1.ObjectMeta{Name: "u1"}, Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, NodeSelector: map[string]string{"rack": "r1"}}},
	}
	subnets := []estuaryv1.Subnet{
		subnet("ov4", "ov", "10.0.0.0/24", "0", false),
		subnet("ov4b", "ov", "10.0.1.0/24", "3", false),
		subnet("ov6", "ov", "fd00::/64", "", false),
		subnet("u4", "u1", "10.1.0.0/24", "0", false),
		subnet("u4p", "u1", "10.1.1.0/24", "9", true),
	}
	av := AvailabilityOf(subnets)
	got := Desired(map[string]string{"rack": "r1"}, nets, av)
	want := map[string]string{
		netmodel.NetworkKey("ov"): netmodel.ValueAttached, netmodel.AvailableKey("ov", family.IPv4): netmodel.ValueTrue, netmodel.AvailableKey("ov", family.IPv6): netmodel.ValueTrue,
		netmodel.NetworkKey("u1"): netmodel.ValueAttached, netmodel.AvailableKey("u1", family.IPv4): netmodel.ValueFalse, netmodel.AvailableKey("u1", family.IPv6): netmodel.ValueFalse,
	}
	if !maps.Equal(got, want) {
		t.Errorf("Desired on rack r1 = %v, want %v", got, want)
	}
	if got := Desired(map[string]string{"rack": "r2"}, nets, av); len(got) != 3 || got[netmodel.NetworkKey("u1")] != "" {
		t.Errorf("Desired on rack r2 = %v, want only the overlay's labels", got)
	}

	have := map[string]string{
		"rack": "r1", netmodel.Prefix + "vtep-ip": "keep", netmodel.Prefix + "network-gone": netmodel.ValueAttached,
		netmodel.NetworkKey("ov"): netmodel.ValueAttached, netmodel.AvailableKey("ov", family.IPv4): netmodel.ValueFalse,
	}
	ch := Changes(have, want)
	if ch[netmodel.Prefix+"network-gone"] != nil || len(ch) != 6 {
		t.Errorf("Changes = %v, want 5 sets and the stale key removed", ch)
	}
	if _, touched := ch[netmodel.Prefix+"vtep-ip"]; touched {
		t.Errorf("Changes touches an unmanaged key")
	}
	if _, touched := ch["rack"]; touched {
		t.Errorf("Changes touches a foreign label")
	}
	if _, touched := ch[netmodel.NetworkKey("ov")]; touched {
		t.Errorf("Changes rewrites a label that is already right")
	}
	merged := maps.Clone(have)
	for k, v := range ch {
		if v == nil {
			delete(merged, k)
		} else {
			merged[k] = *v
		}
	}
	if ch := Changes(merged, want); ch != nil {
		t.Errorf("Changes after applying them = %v, want nil", ch)
	}
}

func subnet(name, network, cidr, available string, private bool) estuaryv1.Subnet {
	return estuaryv1.Subnet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       estuaryv1.SubnetSpec{Network: network, Private: private, Range: estuaryv1.AddressRange{CIDR: cidr}},
		Status:     estuaryv1.SubnetStatus{Available: available},
	}
}
