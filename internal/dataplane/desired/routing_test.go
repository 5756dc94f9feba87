package desired

import (
	"strings"
	"testing"
)

// The host veth's name is a contract between versions: a daemon finds the
// veths an older one made by recomputing their names, so the name of one
// attachment never changes, fits IFNAMSIZ and is estuary's to own.
func TestHostVethNameIsStableAndOwned(t *testing.T) {
	n := HostVethName("abc", "eth0")
	if n != "est538f587a236" {
		t.Errorf("HostVethName(abc, eth0) = %q, want est538f587a236 as every release has named it", n)
	}
	if len(n) > 15 || !strings.HasPrefix(n, HostVethPrefix) || !DefaultOwnership().OwnsDevice(n) {
		t.Errorf("%q: want at most 15 bytes, prefix %s, owned by estuary", n, HostVethPrefix)
	}
	if HostVethName("abc", "net1") == n || HostVethName("abd", "eth0") == n {
		t.Errorf("another attachment shares the name %s", n)
	}
}
