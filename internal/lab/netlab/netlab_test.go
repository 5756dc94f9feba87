package netlab

import (
	"net/netip"
	"os"
	"testing"
)

// The namespaces here use their own prefix so a lab's cleanup never races them.
func TestNamespacesLinksAndProbe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	a, b := "estut-a", "estut-b"
	t.Cleanup(func() { _ = Delete(a); _ = Delete(b) })
	for _, n := range []string{a, b} {
		if err := Create(n); err != nil {
			t.Fatal(err)
		}
		if err := Create(n); err != nil {
			t.Fatalf("second Create(%s): %v", n, err)
		}
	}
	if err := Bridge(a, "br0"); err != nil {
		t.Fatal(err)
	}
	if err := Veth(a, "estut-port", "br0", b, "eth0"); err != nil {
		t.Fatal(err)
	}
	if err := Veth(a, "estut-port", "br0", b, "eth1"); err != nil {
		t.Fatalf("replacing a veth: %v", err)
	}
	if err := AddAddr(b, "eth1", netip.MustParsePrefix("10.99.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if err := Route(b, netip.Prefix{}, netip.MustParseAddr("10.99.0.1")); err != nil {
		t.Fatal(err)
	}
	if err := Sysctl(b, "net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	names, err := List("estut-")
	if err != nil || len(names) != 2 {
		t.Fatalf("List = %v, %v", names, err)
	}
	caps, err := Probe("estut-probe")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capabilities: %+v", caps)
	if !caps.VLAN && caps.Detail == "" {
		t.Error("missing VLAN support without a reason")
	}
	if _, err := os.Stat(Path("estut-probe")); err == nil {
		t.Error("probe namespace left behind")
	}
	for _, n := range []string{a, b} {
		if err := Delete(n); err != nil {
			t.Fatal(err)
		}
	}
	if names, _ := List("estut-"); len(names) != 0 {
		t.Errorf("left %v", names)
	}
}
