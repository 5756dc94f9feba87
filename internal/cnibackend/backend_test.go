package cnibackend

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// env is a fake host namespace with an uplink address (10.99.0.1/24,
// fd99::1/64 on lan0) and a backend pointed at it.
type env struct {
	host    string
	addrs   *ipwait.Static
	plumber *podnet.Plumber
	b       *Backend
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	host := nstest.New(tb)
	ipCmd(tb, host, "link", "set", "lo", "up")
	ipCmd(tb, host, "link", "add", "lan0", "type", "veth", "peer", "name", "lan0p")
	ipCmd(tb, host, "link", "set", "lan0", "up")
	ipCmd(tb, host, "link", "set", "lan0p", "up")
	ipCmd(tb, host, "addr", "add", "10.99.0.1/24", "dev", "lan0")
	if ipv6Enabled() {
		ipCmd(tb, host, "addr", "add", "fd99::1/64", "dev", "lan0", "nodad")
	}
	addrs := ipwait.NewStatic()
	plumber := podnet.NewPlumber(host)
	b, err := New(Config{Plumber: plumber, Addresses: addrs, AddressTimeout: 2 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return &env{host: host, addrs: addrs, plumber: plumber, b: b}
}

// hostVeth is the host side of a's interface.
func hostVeth(a cniserver.Attachment) string {
	return podnet.HostVethName(a.ContainerID, a.IfName)
}

func ipv6Enabled() bool {
	_, err := os.Stat("/proc/sys/net/ipv6")
	return err == nil
}

func requireIPv6(t *testing.T) {
	t.Helper()
	if !ipv6Enabled() {
		t.Skip("kernel has no IPv6 (/proc/sys/net/ipv6 missing)")
	}
}

// ipCmd runs `ip -n <ns> args...` and returns its output.
func ipCmd(tb testing.TB, ns string, args ...string) string {
	tb.Helper()
	out, err := exec.Command("ip", append([]string{"-n", filepath.Base(ns)}, args...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("ip -n %s %s: %v\n%s", filepath.Base(ns), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func addr(s string) ipwait.Address {
	p := netip.MustParsePrefix(s)
	return ipwait.Address{IP: p, Family: family.Of(p.Addr())}
}

func (e *env) pod(t *testing.T, name, ifname string, addrs ...ipwait.Address) (cniserver.Attachment, string) {
	t.Helper()
	ns := nstest.New(t)
	e.addrs.Set("default", name, addrs...)
	return cniserver.Attachment{
		ContainerID: "c-" + name, IfName: ifname, Netns: ns,
		PodNamespace: "default", PodName: name, PodUID: "uid-" + name,
	}, ns
}

func (e *env) add(t *testing.T, a cniserver.Attachment) {
	t.Helper()
	if _, err := e.b.Add(context.Background(), a); err != nil {
		t.Fatalf("Add: %v", err)
	}
	t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
}

func hostLinks(t *testing.T, host string) string {
	t.Helper()
	return ipCmd(t, host, "-o", "link", "show")
}

func TestAddIPv4(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "web-0", "eth0", addr("10.0.0.5/24"))
	r, err := e.b.Add(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
	hv := hostVeth(a)
	if len(r.Interfaces) != 2 || r.Interfaces[0].Name != hv || r.Interfaces[0].Mac != "ee:ee:ee:ee:ee:ee" ||
		r.Interfaces[1].Name != "eth0" || r.Interfaces[1].Sandbox != podNS || r.Interfaces[1].Mac == "" {
		t.Errorf("interfaces = %v", r.Interfaces)
	}
	if len(r.Ips) != 1 || r.Ips[0].Address != "10.0.0.5/32" || r.Ips[0].Gateway != "169.254.1.1" ||
		r.Ips[0].GetInterface() != 1 {
		t.Errorf("ips = %v", r.Ips)
	}
	if len(r.Routes) != 1 || r.Routes[0].Dst != "0.0.0.0/0" || r.Routes[0].Gw != "169.254.1.1" {
		t.Errorf("routes = %v", r.Routes)
	}
	for _, want := range []struct{ ns, out, substr string }{
		{e.host, ipCmd(t, e.host, "route", "show", "table", "1000"), "10.0.0.5 dev " + hv + " proto 229 scope link"},
		{e.host, ipCmd(t, e.host, "rule", "show"), "1000:\tfrom all lookup 1000"},
		{podNS, ipCmd(t, podNS, "route", "show"), "default via 169.254.1.1 dev eth0 proto 229 onlink"},
		{podNS, ipCmd(t, podNS, "neigh", "show"), "169.254.1.1 dev eth0 lladdr ee:ee:ee:ee:ee:ee PERMANENT"},
		{podNS, ipCmd(t, podNS, "addr", "show", "eth0"), "inet 10.0.0.5/32"},
		{e.host, readSysctl(t, e.host, "net/ipv4/conf/"+hv+"/proxy_arp"), "1"},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("%s: want %q in\n%s", filepath.Base(want.ns), want.substr, want.out)
		}
	}
	ping(t, e.host, "10.0.0.5", podNS)
	ping(t, podNS, "10.99.0.1", e.host)
}

func readSysctl(t *testing.T, ns, key string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", filepath.Base(ns), "cat", "/proc/sys/"+key).CombinedOutput()
	if err != nil {
		t.Errorf("read %s in %s: %v\n%s", key, ns, err, out)
	}
	return string(out)
}

func TestAddDualStack(t *testing.T) {
	requireIPv6(t)
	e := newEnv(t)
	a, podNS := e.pod(t, "ds", "eth0", addr("10.0.0.6/24"), addr("fd00::6/64"))
	r, err := e.b.Add(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
	if len(r.Ips) != 2 || r.Ips[1].Address != "fd00::6/128" || r.Ips[1].Gateway != "fe80::ecee:eeff:feee:eeee" {
		t.Errorf("ips = %v", r.Ips)
	}
	hv := hostVeth(a)
	for _, want := range []struct{ out, substr string }{
		{ipCmd(t, e.host, "-6", "route", "show", "table", "1000"), "fd00::6 dev " + hv + " proto 229"},
		{ipCmd(t, e.host, "-6", "rule", "show"), "1000:\tfrom all lookup 1000"},
		{ipCmd(t, e.host, "-6", "neigh", "show", "proxy"), "fe80::ecee:eeff:feee:eeee dev " + hv + " proxy"},
		{ipCmd(t, podNS, "-6", "route", "show"), "default via fe80::ecee:eeff:feee:eeee dev eth0 proto 229"},
		{ipCmd(t, podNS, "-6", "neigh", "show"), "fe80::ecee:eeff:feee:eeee dev eth0 lladdr ee:ee:ee:ee:ee:ee PERMANENT"},
		{readSysctl(t, e.host, "net/ipv6/conf/"+hv+"/proxy_ndp"), "1"},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("want %q in\n%s", want.substr, want.out)
		}
	}
	ping(t, e.host, "10.0.0.6", podNS)
	ping(t, podNS, "10.99.0.1", e.host)
	ping(t, e.host, "fd00::6", podNS)
	ping(t, podNS, "fd99::1", e.host)
}

func TestAddOtherIfName(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "multi", "net1", addr("10.0.0.7/24"))
	e.add(t, a)
	if out := ipCmd(t, podNS, "addr", "show", "net1"); !strings.Contains(out, "inet 10.0.0.7/32") {
		t.Errorf("net1 lacks 10.0.0.7/32:\n%s", out)
	}
	if out := ipCmd(t, podNS, "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Errorf("pod has an eth0:\n%s", out)
	}
	ping(t, e.host, "10.0.0.7", podNS)
	ping(t, podNS, "10.99.0.1", e.host)
}

func TestAddIdempotent(t *testing.T) {
	e := newEnv(t)
	a, _ := e.pod(t, "again", "eth0", addr("10.0.0.8/24"))
	first, err := e.b.Add(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
	second, err := e.b.Add(context.Background(), a)
	if err != nil {
		t.Fatalf("second Add: %v", err)
	}
	if !proto.Equal(first, second) {
		t.Errorf("second Add = %v, first = %v", second, first)
	}
	ping(t, e.host, "10.0.0.8", a.Netns)
}

func TestAddMissingNetnsLeavesNothing(t *testing.T) {
	e := newEnv(t)
	e.addrs.Set("default", "ghost", addr("10.0.0.9/24"))
	a := cniserver.Attachment{ContainerID: "c-ghost", IfName: "eth0", Netns: "/run/netns/" + nstest.Prefix + "absent",
		PodNamespace: "default", PodName: "ghost"}
	_, err := e.b.Add(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "pod default/ghost") {
		t.Fatalf("Add = %v, want an error naming pod default/ghost", err)
	}
	if r := cniserver.ReasonOf(err); r != cniserver.ReasonNetns {
		t.Errorf("reason of %v = %s, want %s", err, r, cniserver.ReasonNetns)
	}
	if out := hostLinks(t, e.host); strings.Contains(out, podnet.HostVethPrefix) {
		t.Errorf("host has links left:\n%s", out)
	}
}

func TestAddFailureCleansUp(t *testing.T) {
	requireIPv6(t)
	e := newEnv(t)
	a, podNS := e.pod(t, "noipv6", "eth0", addr("10.0.0.10/24"), addr("fd00::10/64"))
	// New links in the pod get IPv6 disabled, so the pod's IPv6 address is
	// refused after the pair exists.
	out, err := exec.Command("ip", "netns", "exec", filepath.Base(podNS), "sysctl", "-w",
		"net.ipv6.conf.default.disable_ipv6=1").CombinedOutput()
	if err != nil {
		t.Fatalf("disable IPv6: %v\n%s", err, out)
	}
	_, err = e.b.Add(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "pod default/noipv6: pod side eth0") {
		t.Fatalf("Add = %v, want an error naming pod default/noipv6 and its interface", err)
	}
	t.Logf("Add failed as intended: %v", err)
	if r := cniserver.ReasonOf(err); r != cniserver.ReasonDataplane {
		t.Errorf("reason of %v = %s, want %s", err, r, cniserver.ReasonDataplane)
	}
	if out := hostLinks(t, e.host); strings.Contains(out, hostVeth(a)) {
		t.Errorf("host veth left behind:\n%s", out)
	}
	if out := ipCmd(t, podNS, "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Errorf("pod interface left behind:\n%s", out)
	}
	if out := ipCmd(t, e.host, "route", "show", "table", "all"); strings.Contains(out, "10.0.0.10") {
		t.Errorf("host route left behind:\n%s", out)
	}
}

func TestAddressTimeout(t *testing.T) {
	e := newEnv(t)
	e.b.cfg.AddressTimeout = 100 * time.Millisecond
	a, _ := e.pod(t, "late", "eth0")
	e.addrs.Delete("default", "late")
	_, err := e.b.Add(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "pod default/late") {
		t.Fatalf("Add = %v, want a timeout naming pod default/late", err)
	}
	if r := cniserver.ReasonOf(err); r != cniserver.ReasonIPAMTimeout {
		t.Errorf("reason of %v = %s, want %s", err, r, cniserver.ReasonIPAMTimeout)
	}
	if out := hostLinks(t, e.host); strings.Contains(out, podnet.HostVethPrefix) {
		t.Errorf("host has links left:\n%s", out)
	}
}

func TestDelTwice(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "gone", "eth0", addr("10.0.0.11/24"))
	e.add(t, a)
	bare := cniserver.Attachment{ContainerID: a.ContainerID, IfName: a.IfName} // as a DEL without CNI_ARGS
	for i := range 2 {
		if err := e.b.Del(context.Background(), bare); err != nil {
			t.Fatalf("Del %d: %v", i+1, err)
		}
	}
	if out := hostLinks(t, e.host); strings.Contains(out, hostVeth(a)) {
		t.Errorf("host veth left:\n%s", out)
	}
	if out := ipCmd(t, e.host, "route", "show", "table", "1000"); strings.Contains(out, "10.0.0.11") {
		t.Errorf("host route left:\n%s", out)
	}
	if out := ipCmd(t, podNS, "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Errorf("pod interface left:\n%s", out)
	}
}

func TestDelNetnsGone(t *testing.T) {
	e := newEnv(t)
	podNS := nstest.New(t) // removed here first, as a runtime does; its cleanup accepts that
	e.addrs.Set("default", "vanish", addr("10.0.0.12/24"))
	a := cniserver.Attachment{ContainerID: "c-vanish", IfName: "eth0", Netns: podNS,
		PodNamespace: "default", PodName: "vanish"}
	e.add(t, a)
	if out, err := exec.Command("ip", "netns", "del", filepath.Base(podNS)).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v\n%s", err, out)
	}
	for i := range 2 {
		if err := e.b.Del(context.Background(), a); err != nil {
			t.Fatalf("Del %d with the namespace gone: %v", i+1, err)
		}
	}
	if out := hostLinks(t, e.host); strings.Contains(out, hostVeth(a)) {
		t.Errorf("host veth left:\n%s", out)
	}
}

func TestCheck(t *testing.T) {
	e := newEnv(t)
	a, _ := e.pod(t, "checked", "eth0", addr("10.0.0.13/24"))
	e.add(t, a)
	ep := endpointstore.Endpoint{Netns: a.Netns, IPs: []string{"10.0.0.13/32"}}
	if err := e.b.Check(context.Background(), a, ep); err != nil {
		t.Fatalf("Check after Add: %v", err)
	}
	ping(t, e.host, "10.0.0.13", a.Netns)
	ipCmd(t, e.host, "route", "del", "10.0.0.13/32", "table", "1000")
	if err := nstest.UDPRoundTrip(e.host, netip.MustParseAddr("10.0.0.13"), a.Netns); err == nil {
		t.Error("host reached the pod without its route")
	}
	err := e.b.Check(context.Background(), a, ep)
	want := "route 10.0.0.13/32 table 1000 dev " + hostVeth(a) + " missing"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pod default/checked") {
		t.Fatalf("Check = %v, want it to name %q", err, want)
	}
	if r := cniserver.ReasonOf(err); r != cniserver.ReasonMismatch {
		t.Errorf("reason of %v = %s, want %s", err, r, cniserver.ReasonMismatch)
	}
	ipCmd(t, a.Netns, "route", "del", "default")
	err = e.b.Check(context.Background(), a, ep)
	if err == nil || !strings.Contains(err.Error(), "pod route 0.0.0.0/0 table 254 via 169.254.1.1 dev eth0 missing") {
		t.Fatalf("Check = %v, want it to name the pod's default route", err)
	}
	if err := e.b.Del(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Check(context.Background(), a, ep); err == nil || !strings.Contains(err.Error(), "interface eth0") {
		t.Fatalf("Check after Del = %v, want the interface named", err)
	}
}

func TestTwoPodsViaHost(t *testing.T) {
	e := newEnv(t)
	a1, ns1 := e.pod(t, "one", "eth0", addr("10.0.0.21/24"))
	a2, ns2 := e.pod(t, "two", "eth0", addr("10.0.0.22/24"))
	e.add(t, a1)
	e.add(t, a2)
	if hostVeth(a1) == hostVeth(a2) {
		t.Fatal("two pods share a host veth name")
	}
	ping(t, ns1, "10.0.0.22", ns2)
	ping(t, ns2, "10.0.0.21", ns1)

	if err := e.b.Del(context.Background(), a1); err != nil {
		t.Fatal(err)
	}
	out := ipCmd(t, e.host, "route", "show", "table", "1000")
	if strings.Contains(out, "10.0.0.21") || !strings.Contains(out, "10.0.0.22 dev "+hostVeth(a2)) {
		t.Errorf("after deleting pod one, table 1000 is\n%s", out)
	}
	if !strings.Contains(ipCmd(t, e.host, "rule", "show"), "lookup 1000") {
		t.Error("the shared rule went with pod one")
	}
	ping(t, e.host, "10.0.0.22", ns2)
}

func TestReady(t *testing.T) {
	e := newEnv(t)
	if err := e.b.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	b, err := New(Config{Plumber: podnet.NewPlumber("/run/netns/" + nstest.Prefix + "absent"), Addresses: ipwait.NewStatic()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(context.Background()); err == nil {
		t.Error("Ready with a missing host namespace succeeded")
	}
}

// TestHostVethName: the host side Add makes for an attachment is named by
// its container ID and interface name alone.
func TestHostVethName(t *testing.T) {
	a := cniserver.Attachment{ContainerID: "abc", IfName: "eth0", PodNamespace: "default", PodName: "web-0"}
	n := specVeth(a)
	if len(n) != 14 || !strings.HasPrefix(n, podnet.HostVethPrefix) || n != specVeth(a) {
		t.Errorf("HostVethName = %q", n)
	}
	if !desired.DefaultOwnership().OwnsDevice(n) {
		t.Errorf("%s is outside estuary's devices", n)
	}
	for _, b := range []cniserver.Attachment{
		{ContainerID: "abd", IfName: "eth0", PodNamespace: "default", PodName: "web-0"},
		{ContainerID: "abc", IfName: "net1", PodNamespace: "default", PodName: "web-0"},
	} {
		if specVeth(b) == n {
			t.Errorf("%+v shares the name %s", b, n)
		}
	}
	if specVeth(cniserver.Attachment{ContainerID: "abc", IfName: "eth0"}) != n {
		t.Error("the name depends on the pod's identity, which DEL may lack")
	}
}

// specVeth is the host side Add makes for a.
func specVeth(a cniserver.Attachment) string {
	return spec(a, nil, desired.MAC{}, 0).HostVeth()
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{Addresses: ipwait.NewStatic()}); err == nil {
		t.Error("New without Plumber succeeded")
	}
	if _, err := New(Config{Plumber: podnet.NewPlumber("")}); err == nil {
		t.Error("New without Addresses succeeded")
	}
	if _, err := New(Config{Plumber: podnet.NewPlumber(""), Addresses: ipwait.NewStatic(), MTU: -1}); err == nil {
		t.Error("New with a negative MTU succeeded")
	}
	if _, err := New(Config{Plumber: podnet.NewPlumber(""), Addresses: ipwait.NewStatic(), UnderlayMTU: -1}); err == nil {
		t.Error("New with a negative UnderlayMTU succeeded")
	}
}

// TestProxyARPFallback: with the pod's permanent gateway entry flushed, the
// host side answers ARP for 169.254.1.1 (proxy ARP needs the host to have a
// route to the target through another link, as a node's default route is).
func TestProxyARPFallback(t *testing.T) {
	e := newEnv(t)
	ipCmd(t, e.host, "route", "add", "default", "via", "10.99.0.254", "dev", "lan0")
	a, podNS := e.pod(t, "flushed", "eth0", addr("10.0.0.41/24"))
	e.add(t, a)
	ipCmd(t, podNS, "neigh", "flush", "dev", "eth0", "nud", "permanent")
	if out := ipCmd(t, podNS, "neigh", "show", "169.254.1.1"); strings.TrimSpace(out) != "" {
		t.Fatalf("gateway entry survived the flush:\n%s", out)
	}
	ping(t, podNS, "10.99.0.1", e.host)
	out := ipCmd(t, podNS, "neigh", "show", "169.254.1.1")
	if !strings.Contains(out, "lladdr ee:ee:ee:ee:ee:ee") || strings.Contains(out, "PERMANENT") {
		t.Errorf("pod did not learn the gateway by ARP:\n%s", out)
	}
}

// TestParallelAdds: pods added at once on one host (the server runs
// different containers in parallel) share the rule and all work.
func TestParallelAdds(t *testing.T) {
	e := newEnv(t)
	const n = 6
	atts := make([]cniserver.Attachment, n)
	for i := range atts {
		atts[i], _ = e.pod(t, fmt.Sprintf("par-%d", i), "eth0", addr(fmt.Sprintf("10.0.1.%d/24", i+1)))
	}
	errs := make(chan error, n)
	for _, a := range atts {
		go func() {
			_, err := e.b.Add(context.Background(), a)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i, a := range atts {
		t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
		ping(t, e.host, fmt.Sprintf("10.0.1.%d", i+1), a.Netns)
	}
	if got := strings.Count(ipCmd(t, e.host, "rule", "show"), "lookup 1000"); got != 1 {
		t.Errorf("%d rules lookup 1000, want 1", got)
	}
}

// readinessFunc adapts a function of the pod's addresses to Readiness.
type readinessFunc func(ctx context.Context, ips []netip.Addr) error

func (f readinessFunc) PodReady(ctx context.Context, addrs []ipwait.Address) error {
	ips := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		ips = append(ips, a.IP.Addr())
	}
	return f(ctx, ips)
}

// Readiness runs once the pod's interface works, with the pod's addresses;
// its failure fails the Add, names the pod and leaves nothing behind.
func TestReadinessGatesAdd(t *testing.T) {
	e := newEnv(t)
	var seen []netip.Addr
	var routed bool
	fail := errors.New("address 10.0.0.11 of subnet rack1-v4 is in use on the segment")
	e.b.cfg.Readiness = readinessFunc(func(_ context.Context, ips []netip.Addr) error {
		seen = ips
		routed = strings.Contains(ipCmd(t, e.host, "route", "show", "table", "all"), "10.0.0.11")
		if ips[0] == netip.MustParseAddr("10.0.0.11") {
			return fail
		}
		return nil
	})
	ok, _ := e.pod(t, "ready", "eth0", addr("10.0.0.10/24"))
	e.add(t, ok)
	if !slices.Equal(seen, []netip.Addr{netip.MustParseAddr("10.0.0.10")}) {
		t.Errorf("Readiness saw %v, want the pod's address 10.0.0.10", seen)
	}
	bad, podNS := e.pod(t, "dup", "eth0", addr("10.0.0.11/24"))
	_, err := e.b.Add(context.Background(), bad)
	if !errors.Is(err, fail) || !strings.Contains(err.Error(), "pod default/dup") {
		t.Fatalf("Add = %v, want the readiness error naming pod default/dup", err)
	}
	if !routed {
		t.Error("Readiness ran before the host route to the pod existed")
	}
	if out := hostLinks(t, e.host); strings.Contains(out, hostVeth(bad)) {
		t.Errorf("host veth left behind:\n%s", out)
	}
	if out := ipCmd(t, podNS, "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Errorf("pod interface left behind:\n%s", out)
	}
}
