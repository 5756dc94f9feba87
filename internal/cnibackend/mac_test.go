package cnibackend

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

var pinMAC = desired.MustParseMAC("02:42:0a:00:00:07")

// pinned is addr s pinning mac.
func pinned(s string, mac desired.MAC) ipwait.Address {
	a := addr(s)
	a.MAC = mac
	return a
}

// readLink reads link name in the namespace at ns over netlink.
func readLink(t *testing.T, ns, name string) ops.Link {
	t.Helper()
	h, err := ops.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.Links().Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// linkMAC reads the MAC of link name in the namespace at ns over netlink.
func linkMAC(t *testing.T, ns, name string) desired.MAC {
	t.Helper()
	l := readLink(t, ns, name)
	m, err := desired.MACFrom(l.MAC)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return m
}

func TestPinnedMAC(t *testing.T) {
	other := desired.MustParseMAC("02:42:0a:00:00:08")
	for _, c := range []struct {
		name  string
		addrs []ipwait.Address
		want  desired.MAC
		err   []string // substrings of the error; nil: no error
	}{
		{name: "no addresses"},
		{name: "none pinned", addrs: []ipwait.Address{addr("10.0.0.5/24"), addr("fd00::5/64")}},
		{name: "one pinned", addrs: []ipwait.Address{pinned("10.0.0.5/24", pinMAC)}, want: pinMAC},
		{name: "both pin the same", addrs: []ipwait.Address{pinned("10.0.0.5/24", pinMAC), pinned("fd00::5/64", pinMAC)}, want: pinMAC},
		{name: "one pins, one does not", addrs: []ipwait.Address{pinned("10.0.0.5/24", pinMAC), addr("fd00::5/64")},
			err: []string{"10.0.0.5/24", "fd00::5/64", "02:42:0a:00:00:07 and none"}},
		{name: "two MACs", addrs: []ipwait.Address{pinned("10.0.0.5/24", pinMAC), pinned("fd00::5/64", other)},
			err: []string{"02:42:0a:00:00:07 and 02:42:0a:00:00:08"}},
		{name: "multicast", addrs: []ipwait.Address{pinned("10.0.0.5/24", desired.MustParseMAC("01:00:5e:00:00:01"))},
			err: []string{"01:00:5e:00:00:01", "multicast"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := pinnedMAC(c.addrs)
			if c.err == nil {
				if err != nil || got != c.want {
					t.Fatalf("pinnedMAC = %s, %v; want %s", got, err, c.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("pinnedMAC = %s, want an error", got)
			}
			for _, s := range c.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

// TestAddPinnedMAC: a pod whose addresses pin a MAC gets exactly that MAC on
// its interface (read in its namespace), reported in the result; traffic
// flows; Check passes, and names the MAC once it is changed in the pod.
func TestAddPinnedMAC(t *testing.T) {
	e := newEnv(t)
	addrs := []ipwait.Address{pinned("10.0.0.51/24", pinMAC)}
	if ipv6Enabled() {
		addrs = append(addrs, pinned("fd00::51/64", pinMAC))
	}
	a, podNS := e.pod(t, "pinned", "eth0", addrs...)
	r, err := e.b.Add(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
	if got := linkMAC(t, podNS, "eth0"); got != pinMAC {
		t.Errorf("eth0 in the pod has MAC %s, want the pinned %s", got, pinMAC)
	}
	if len(r.Interfaces) != 2 || r.Interfaces[1].Mac != pinMAC.String() || r.Interfaces[1].Sandbox != podNS {
		t.Errorf("result interfaces = %v, want the pod side with MAC %s", r.Interfaces, pinMAC)
	}
	ping(t, e.host, "10.0.0.51", podNS)
	if ipv6Enabled() {
		ping(t, e.host, "fd00::51", podNS)
	}
	ep := endpointstore.Endpoint{Netns: podNS}
	for _, ip := range r.Ips {
		ep.IPs = append(ep.IPs, ip.Address)
	}
	if err := e.b.Check(context.Background(), a, ep); err != nil {
		t.Fatalf("Check: %v", err)
	}
	ipCmd(t, podNS, "link", "set", "eth0", "address", "02:42:0a:00:00:99")
	err = e.b.Check(context.Background(), a, ep)
	want := "interface eth0 has MAC 02:42:0a:00:00:99, not the pinned " + pinMAC.String()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Check after the MAC changed = %v, want %q", err, want)
	}
}

// TestAddKernelMAC: without a pinned MAC the kernel chooses the pod side's,
// the result reports it, and Check does not look at it.
func TestAddKernelMAC(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "unpinned", "eth0", addr("10.0.0.52/24"))
	r, err := e.b.Add(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
	got := linkMAC(t, podNS, "eth0")
	if got.IsZero() || got.IsMulticast() || got == podnet.HostMAC || got == pinMAC {
		t.Errorf("eth0 has MAC %s, want a unicast one the kernel chose", got)
	}
	if r.Interfaces[1].Mac != got.String() {
		t.Errorf("result reports MAC %s, the pod has %s", r.Interfaces[1].Mac, got)
	}
	if alias := linkAlias(t, e.host, hostVeth(a)); strings.Contains(alias, "mac=") {
		t.Errorf("host veth alias %q records a pinned MAC", alias)
	}
	ipCmd(t, podNS, "link", "set", "eth0", "address", "02:42:0a:00:00:98")
	// A new address flushes the link's neighbours, the permanent ones too.
	ipCmd(t, podNS, "neigh", "replace", "169.254.1.1", "lladdr", podnet.HostMAC.String(), "dev", "eth0", "nud", "permanent")
	if err := e.b.Check(context.Background(), a, endpointstore.Endpoint{Netns: podNS, IPs: []string{"10.0.0.52/32"}}); err != nil {
		t.Errorf("Check of a pod with no pinned MAC after its MAC changed: %v", err)
	}
}

func linkAlias(t *testing.T, ns, name string) string {
	t.Helper()
	return readLink(t, ns, name).Alias
}

// TestAddDisagreeingMACsLeavesNothing: addresses that pin different MACs
// fail the Add naming them, before anything is made.
func TestAddDisagreeingMACsLeavesNothing(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "split", "eth0", pinned("10.0.0.53/24", pinMAC), pinned("fd00::53/64", desired.MustParseMAC("02:42:0a:00:01:35")))
	_, err := e.b.Add(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), "pod default/split") || !strings.Contains(err.Error(), "fd00::53/64") {
		t.Fatalf("Add = %v, want an error naming pod default/split and its addresses", err)
	}
	if out := hostLinks(t, e.host); strings.Contains(out, podnet.HostVethPrefix) {
		t.Errorf("host has links left:\n%s", out)
	}
	if out := ipCmd(t, podNS, "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Errorf("pod interface left behind:\n%s", out)
	}
}

// TestAddRepinsReusedPair: an Add that finds the pair in place (a rebuilt
// endpoint) gives the pod side the MAC its addresses now pin, and the host
// forgets the old one, so traffic to the pod flows at once.
func TestAddRepinsReusedPair(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "repin", "eth0", addr("10.0.0.54/24"))
	e.add(t, a)
	ping(t, e.host, "10.0.0.54", podNS)
	old := linkMAC(t, podNS, "eth0")
	if out := ipCmd(t, e.host, "neigh", "show", "10.0.0.54"); !strings.Contains(out, "lladdr "+old.String()) {
		t.Fatalf("host did not resolve the pod at %s:\n%s", old, out)
	}
	e.addrs.Set("default", "repin", pinned("10.0.0.54/24", pinMAC))
	r, err := e.b.Add(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if got := linkMAC(t, podNS, "eth0"); got != pinMAC || r.Interfaces[1].Mac != pinMAC.String() {
		t.Errorf("after the second Add eth0 has %s, result %s; want %s", got, r.Interfaces[1].Mac, pinMAC)
	}
	if out := ipCmd(t, e.host, "neigh", "show", "10.0.0.54"); strings.Contains(out, old.String()) {
		t.Errorf("host still resolves the pod at its old MAC:\n%s", out)
	}
	ping(t, e.host, "10.0.0.54", podNS)
	if err := e.b.Check(context.Background(), a, endpointstore.Endpoint{Netns: podNS, IPs: []string{"10.0.0.54/32"}}); err != nil {
		t.Errorf("Check after repinning: %v", err)
	}
}

// TestRecoverKeepsPinnedMAC: a daemon that lost its state file recovers the
// endpoint from the kernel; the pod keeps its MAC, a new backend's Check
// verifies it, and the Add the server makes for a recovered endpoint
// reports it.
func TestRecoverKeepsPinnedMAC(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "kept", "eth0", pinned("10.0.0.55/24", pinMAC))
	e.add(t, a)
	plumber := podnet.NewPlumber(e.host)
	restarted, err := New(Config{Plumber: plumber, Addresses: e.addrs})
	if err != nil {
		t.Fatal(err)
	}
	eps, _, err := recoverFrom(plumber, map[netip.Addr]recordedPod{
		netip.MustParseAddr("10.0.0.55"): {Namespace: "default", Pod: "kept", PodUID: "uid-kept"},
	}, time.Now().UTC())
	if err != nil || len(eps) != 1 {
		t.Fatalf("Recover = %+v, %v; want the one endpoint", eps, err)
	}
	if got := linkMAC(t, podNS, "eth0"); got != pinMAC {
		t.Errorf("after recovery eth0 has MAC %s, want %s", got, pinMAC)
	}
	if err := restarted.Check(context.Background(), a, eps[0]); err != nil {
		t.Errorf("Check of the recovered endpoint: %v", err)
	}
	ipCmd(t, podNS, "link", "set", "eth0", "address", "02:42:0a:00:00:97")
	if err := restarted.Check(context.Background(), a, eps[0]); err == nil || !strings.Contains(err.Error(), "not the pinned") {
		t.Errorf("Check of the recovered endpoint with the MAC changed = %v, want the pinned MAC named", err)
	}
	r, err := restarted.Add(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if got := linkMAC(t, podNS, "eth0"); got != pinMAC || r.Interfaces[1].Mac != pinMAC.String() {
		t.Errorf("Add of the recovered endpoint: eth0 has %s, result %s; want %s", got, r.Interfaces[1].Mac, pinMAC)
	}
	if err := restarted.Check(context.Background(), a, eps[0]); err != nil {
		t.Errorf("Check after the Add restored the MAC: %v", err)
	}
	ping(t, e.host, "10.0.0.55", podNS)
}
