package podnet

import (
	"strings"
	"testing"
	"unicode"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// aliasKeyValid is what the CNI server accepts of a container ID and an
// interface name (cniserver's validateContainerID and validateIfName), the
// only keys podnet writes aliases for.
func aliasKeyValid(id, ifname string) bool {
	if id == "" || len(id) > maxContainerIDLen || ifname == "" || len(ifname) > 15 || ifname == "." || ifname == ".." {
		return false
	}
	for i, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '_' && r != '.' && r != '-') {
			return false
		}
	}
	return !strings.ContainsFunc(ifname, func(r rune) bool { return r == '/' || r == ':' || r <= ' ' || r >= 0x7f })
}

// FuzzParseEndpointAlias: parseEndpointAlias, which reads the host veths'
// aliases to rebuild the node's endpoint records, never panics; what it
// accepts has a key with no white space and no "/" in the interface name,
// and endpointAlias writes it back to an alias it reads the same. An alias
// endpointAlias writes for any attachment the CNI server accepts reads back
// its key and MAC, and its netns or none (when it did not fit or holds
// white space), and fits the kernel's limit.
func FuzzParseEndpointAlias(f *testing.F) {
	mac := []byte{2, 0x42, 10, 0, 0, 7}
	for _, s := range []struct {
		alias, id, ifname, netns string
		mac                      []byte
	}{
		{"estuary c1/eth0 /var/run/netns/cni-1", "c1", "eth0", "/var/run/netns/cni-1", nil},
		{"estuary c1/eth0 /var/run/netns/cni-1 mac=02:42:0a:00:00:07", "c1", "eth0", "/var/run/netns/cni-1", mac},
		{"estuary c1/eth0 mac=02:42:0a:00:00:07", strings.Repeat("c", maxContainerIDLen), "net123456789abc", "/" + strings.Repeat("n", 200), mac},
		{"estuary c/eth0 /ns mac=zz", "c", "eth0", "/var/run/netns/a b", nil},
		{"estuary c/eth0\u00a0/ns", "c", "eth0", "/var/run/netns/a\u00a0b", mac},
		{"estuary c/eth0/x /ns", "c", "eth0", "/ns mac=02:00:00:00:00:01", nil},
		{"estuary c/eth0 /ns mac=ff:ff:ff:ff:ff:ff", "c", "eth0", "/ns", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"estuary c/eth0 /ns mac=02:00:00:00:00:01:02:03", "c", "eth0", "", nil},
		{"estuary /eth0", "", "eth0", "/ns", nil},
		{"estuary  c/eth0\t\n/ns  ", "c", "eth0", "\n", nil},
		{"", "c", "", "", nil},
	} {
		f.Add(s.alias, s.id, s.ifname, s.netns, s.mac)
	}
	f.Fuzz(func(t *testing.T, alias, id, ifname, netns string, macBytes []byte) {
		checkAliasParse(t, alias)
		var m desired.MAC
		if len(macBytes) != len(m) || !aliasKeyValid(id, ifname) {
			return
		}
		copy(m[:], macBytes)
		sp := Spec{ContainerID: id, IfName: ifname, Netns: netns, MAC: m}
		s := endpointAlias(sp)
		got, ok := parseEndpointAlias(s)
		if !ok || got.containerID != id || got.ifName != ifname || got.mac != m || (got.netns != netns && got.netns != "") {
			t.Fatalf("alias %q of %+v reads back as %+v, %v", s, sp, got, ok)
		}
		if len(s) > maxAlias {
			t.Fatalf("alias %q is %d bytes, over the kernel's %d", s, len(s), maxAlias)
		}
	})
}

func checkAliasParse(t *testing.T, alias string) {
	t.Helper()
	a, ok := parseEndpointAlias(alias)
	if !ok {
		if a != (aliasFields{}) {
			t.Fatalf("refused alias %q gave %+v", alias, a)
		}
		return
	}
	for _, v := range []string{a.containerID, a.ifName, a.netns} {
		if strings.ContainsFunc(v, unicode.IsSpace) {
			t.Fatalf("alias %q: field %q holds white space", alias, v)
		}
	}
	if a.containerID == "" || a.ifName == "" || strings.Contains(a.ifName, "/") || strings.HasPrefix(a.netns, aliasMAC) {
		t.Fatalf("alias %q read as %+v", alias, a)
	}
	again, ok := parseEndpointAlias(endpointAlias(Spec{ContainerID: a.containerID, IfName: a.ifName, Netns: a.netns, MAC: a.mac}))
	if !ok || again.containerID != a.containerID || again.ifName != a.ifName || again.mac != a.mac || (again.netns != a.netns && again.netns != "") {
		t.Fatalf("alias %q read as %+v, rewritten and read as %+v, %v", alias, a, again, ok)
	}
}
