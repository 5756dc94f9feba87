package translate

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// TestSpeakerConfigFamilies: a dual-stack node announces each family with
// its own address as next hop and takes its IPv4 address as router id; an
// IPv6-only node takes the last 32 bits of its IPv6 address as router id
// and has no IPv4 next hop; a node whose only address ends in 32 zero bits
// has none and is reported.
func TestSpeakerConfigFamilies(t *testing.T) {
	n := BGPNetwork{Name: "fabric", ASN: 65010}
	dual := objtest.Node("node-1", "", "", "fd00:77::11", "10.77.0.11")
	cfg, err := SpeakerConfig(&dual, n)
	if err != nil || cfg.RouterID != netip.MustParseAddr("10.77.0.11") || cfg.NextHopIPv4 != cfg.RouterID ||
		cfg.NextHopIPv6 != netip.MustParseAddr("fd00:77::11") || cfg.LocalASN != 65010 {
		t.Errorf("dual-stack node: %+v, %v", cfg, err)
	}
	v6 := objtest.Node("node-2", "", "", "fd00:77::a:12")
	cfg, err = SpeakerConfig(&v6, n)
	if err != nil || cfg.RouterID != netip.MustParseAddr("0.10.0.18") || cfg.NextHopIPv4.IsValid() ||
		cfg.NextHopIPv6 != netip.MustParseAddr("fd00:77::a:12") {
		t.Errorf("IPv6-only node: %+v, %v", cfg, err)
	}
	zero := objtest.Node("node-3", "", "", "fd00:77::")
	if _, err := SpeakerConfig(&zero, n); err == nil || !strings.Contains(err.Error(), "node node-3") {
		t.Errorf("node with no usable router id: err = %v", err)
	}
}
