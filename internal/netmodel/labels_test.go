package netmodel

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/estuary-cni/estuary/pkg/family"
)

// validKey reports whether k is a valid label key.
func validKey(k string) bool { return len(validation.IsQualifiedName(k)) == 0 }

func TestKeys(t *testing.T) {
	if got := NetworkKey("ov"); got != "networking.estuary.io/network-ov" {
		t.Errorf("NetworkKey = %q", got)
	}
	if got := AvailableKey("u1", family.IPv6); got != "networking.estuary.io/ipv6-available-u1" {
		t.Errorf("AvailableKey = %q", got)
	}
	long := strings.Repeat("a", 40) + "." + strings.Repeat("b", 60)
	other := strings.Repeat("a", 40) + "." + strings.Repeat("b", 59) + "c"
	for _, k := range []string{NetworkKey(long), AvailableKey(long, family.IPv4), AvailableKey(long, family.IPv6)} {
		if !validKey(k) {
			t.Errorf("%q is not a valid label key", k)
		}
		if !Managed(k) {
			t.Errorf("%q is not recognised as managed", k)
		}
	}
	if AvailableKey(long, family.IPv4) == AvailableKey(other, family.IPv4) {
		t.Errorf("two long names share key %q", AvailableKey(long, family.IPv4))
	}
	// A cut that would end in '.' or '-' is trimmed so the key stays valid.
	dotty := strings.Repeat("a", 37) + strings.Repeat(".a", 30)
	if k := AvailableKey(dotty, family.IPv6); !validKey(k) {
		t.Errorf("%q is not a valid label key", k)
	}
	// The longest name that fits keeps its plain key.
	fits := strings.Repeat("x", 63-len(ipv4Name))
	if got := AvailableKey(fits, family.IPv4); got != Prefix+ipv4Name+fits {
		t.Errorf("AvailableKey(%d chars) = %q, want the plain key", len(fits), got)
	}
}
