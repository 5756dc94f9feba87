package netlab

import (
	"net/netip"
	"os"
	"os/exec"
	"strings"
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

// TestIPNetnsDoesNotHideLabPins: a namespace pinned by the lab stays
// reachable, and deletable, after `ip netns add` has run, which bind-mounts
// the pin directory over itself when it is not a mount point yet.
func TestIPNetnsDoesNotHideLabPins(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2's ip is not installed")
	}
	pin, other := "estut-pin", "estut-ipnetns"
	t.Cleanup(func() { _ = Delete(pin); _ = exec.Command("ip", "netns", "del", other).Run() })
	if err := Create(pin); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "add", other).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", other, err, out)
	}
	if err := LinkUp(pin, "lo"); err != nil {
		t.Fatalf("the lab's namespace after ip netns add: %v", err)
	}
	if err := Delete(pin); err != nil {
		t.Fatalf("delete the lab's namespace after ip netns add: %v", err)
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(info), "/"+pin+" ") {
		t.Errorf("%s is still mounted after Delete:\n%s", pin, info)
	}
}
