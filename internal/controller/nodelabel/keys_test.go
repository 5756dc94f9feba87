package nodelabel

import (
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func TestKeys(t *testing.T) {
	if got := NetworkKey("ov"); got != "networking.estuary.io/network-ov" {
		t.Errorf("NetworkKey = %q", got)
	}
	if got := AvailableKey("u1", IPv6); got != "networking.estuary.io/ipv6-available-u1" {
		t.Errorf("AvailableKey = %q", got)
	}
	long := strings.Repeat("a", 40) + "." + strings.Repeat("b", 60)
	other := strings.Repeat("a", 40) + "." + strings.Repeat("b", 59) + "c"
	for _, k := range []string{NetworkKey(long), AvailableKey(long, IPv4), AvailableKey(long, IPv6)} {
		if !validKey(k) {
			t.Errorf("%q is not a valid label key", k)
		}
		if !managed(k) {
			t.Errorf("%q is not recognised as managed", k)
		}
	}
	if AvailableKey(long, IPv4) == AvailableKey(other, IPv4) {
		t.Errorf("two long names share key %q", AvailableKey(long, IPv4))
	}
	// A cut that would end in '.' or '-' is trimmed so the key stays valid.
	dotty := strings.Repeat("a", 37) + strings.Repeat(".a", 30)
	if k := AvailableKey(dotty, IPv6); !validKey(k) {
		t.Errorf("%q is not a valid label key", k)
	}
	// The longest name that fits keeps its plain key.
	fits := strings.Repeat("x", 63-len(ipv4Name))
	if got := AvailableKey(fits, IPv4); got != Prefix+ipv4Name+fits {
		t.Errorf("AvailableKey(%d chars) = %q, want the plain key", len(fits), got)
	}
}

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
		NetworkKey("ov"): ValueAttached, AvailableKey("ov", IPv4): ValueTrue, AvailableKey("ov", IPv6): ValueTrue,
		NetworkKey("u1"): ValueAttached, AvailableKey("u1", IPv4): ValueFalse, AvailableKey("u1", IPv6): ValueFalse,
	}
	if !maps.Equal(got, want) {
		t.Errorf("Desired on rack r1 = %v, want %v", got, want)
	}
	if got := Desired(map[string]string{"rack": "r2"}, nets, av); len(got) != 3 || got[NetworkKey("u1")] != "" {
		t.Errorf("Desired on rack r2 = %v, want only the overlay's labels", got)
	}

	have := map[string]string{
		"rack": "r1", Prefix + "vtep-ip": "keep", Prefix + "network-gone": ValueAttached,
		NetworkKey("ov"): ValueAttached, AvailableKey("ov", IPv4): ValueFalse,
	}
	ch := Changes(have, want)
	if ch[Prefix+"network-gone"] != nil || len(ch) != 6 {
		t.Errorf("Changes = %v, want 5 sets and the stale key removed", ch)
	}
	if _, touched := ch[Prefix+"vtep-ip"]; touched {
		t.Errorf("Changes touches an unmanaged key")
	}
	if _, touched := ch["rack"]; touched {
		t.Errorf("Changes touches a foreign label")
	}
	if _, touched := ch[NetworkKey("ov")]; touched {
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
