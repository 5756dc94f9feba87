package cnibackend

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// ping proves a round trip: a UDP datagram from a socket in fromNS to dst,
// answered by a socket bound to dst in the namespace that holds dst. The
// echo side is found by trying to bind dst in each candidate namespace.
func ping(t *testing.T, fromNS, dst string, holders ...string) {
	t.Helper()
	if err := nstest.UDPRoundTrip(fromNS, netip.MustParseAddr(dst), holders...); err != nil {
		t.Errorf("%s -> %s: %v", filepath.Base(fromNS), dst, err)
	}
}
