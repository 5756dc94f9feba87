package cnibackend

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"

	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// forwardingV6 turns IPv6 forwarding on for the namespace.
const forwardingV6 = "net/ipv6/conf/all/forwarding"

// raEnv is newEnv (lan0, now also the link of a static IPv6 default route)
// plus a router namespace on the uplink up1 (its end rtr0 holds fe80::99)
// and a management link mgmt0 the admin set to accept_ra 0.
type raEnv struct {
	*env
	router string
}

func newRAEnv(t *testing.T) raEnv {
	t.Helper()
	requireIPv6(t)
	e := newEnv(t)
	router := nstest.New(t)
	ipCmd(t, e.host, "link", "add", "up1", "type", "veth", "peer", "name", "rtr0", "netns", filepath.Base(router))
	ipCmd(t, router, "addr", "add", "fe80::99/64", "dev", "rtr0", "nodad")
	ipCmd(t, router, "link", "set", "rtr0", "up")
	ipCmd(t, e.host, "link", "set", "up1", "up")
	ipCmd(t, e.host, "-6", "route", "add", "default", "via", "fd99::fe", "dev", "lan0", "metric", "2048")
	ipCmd(t, e.host, "link", "add", "mgmt0", "type", "veth", "peer", "name", "mgmt1", "netns", filepath.Base(router))
	if err := sysctl.Write(e.host, []sysctl.Setting{{Key: "net/ipv6/conf/mgmt0/accept_ra", Value: "0"}}); err != nil {
		t.Fatal(err)
	}
	for link, want := range map[string]string{"up1": "1", "lan0": "1", "mgmt0": "0"} {
		if got := strings.TrimSpace(readSysctl(t, e.host, "net/ipv6/conf/"+link+"/accept_ra")); got != want {
			t.Fatalf("before any pod: %s accept_ra = %s, want %s", link, got, want)
		}
	}
	if got := strings.TrimSpace(readSysctl(t, e.host, forwardingV6)); got != "0" {
		t.Fatalf("before any pod: all.forwarding = %s, want 0", got)
	}
	return raEnv{env: e, router: router}
}

func TestFirstIPv6PodKeepsTheUplinksRouterAdvertisements(t *testing.T) {
	e := newRAEnv(t)
	a, _ := e.pod(t, "v6", "eth0", addr("fd00::7/64"))
	e.add(t, a)

	hv := hostVeth(a)
	for link, want := range map[string]string{
		"all":   "1", // forwarding, below: accept_ra of "all" is not touched
		"up1":   "2",
		"lan0":  "2", // the link of the node's address and its default route
		"lan0p": "2",
		"mgmt0": "0", // the admin's 0 stays
		hv:      "0", // a pod's host veth must not accept a pod's RAs
	} {
		if link == "all" {
			if got := strings.TrimSpace(readSysctl(t, e.host, forwardingV6)); got != want {
				t.Errorf("all.forwarding = %s, want %s", got, want)
			}
			continue
		}
		if got := strings.TrimSpace(readSysctl(t, e.host, "net/ipv6/conf/"+link+"/accept_ra")); got != want {
			t.Errorf("%s accept_ra = %s, want %s", link, got, want)
		}
	}
	if got := strings.TrimSpace(readSysctl(t, e.host, "net/ipv6/conf/up1/forwarding")); got != "1" {
		t.Errorf("up1 forwarding = %s, want 1 (copied from all)", got)
	}

	// The router's advertisement still gives the forwarding node its
	// default route and a SLAAC address on the uplink.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := sendRA(e.router, "rtr0"); err != nil {
			t.Fatal(err)
		}
		route := ipCmd(t, e.host, "-6", "route", "show", "default")
		addrs := ipCmd(t, e.host, "-6", "addr", "show", "dev", "up1")
		if strings.Contains(route, "default via fe80::99 dev up1 proto ra") && strings.Contains(addrs, "inet6 fd55::") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no RA-learned default route and address on up1 within 10s:\n%s%s", route, addrs)
		}
		time.Sleep(200 * time.Millisecond) // pace the advertisements
	}
}

func TestIPv6PodLeavesRAAloneWhenForwardingWasOn(t *testing.T) {
	e := newRAEnv(t)
	if err := sysctl.Write(e.host, []sysctl.Setting{{Key: forwardingV6, Value: "1"}}); err != nil {
		t.Fatal(err)
	}
	a, _ := e.pod(t, "v6", "eth0", addr("fd00::8/64"))
	e.add(t, a)
	for _, link := range []string{"up1", "lan0"} {
		if got := strings.TrimSpace(readSysctl(t, e.host, "net/ipv6/conf/"+link+"/accept_ra")); got != "1" {
			t.Errorf("%s accept_ra = %s, want 1: forwarding was the node's own", link, got)
		}
	}
}

func TestIPv4PodLeavesRAAlone(t *testing.T) {
	e := newRAEnv(t)
	a, _ := e.pod(t, "v4", "eth0", addr("10.0.0.9/24"))
	e.add(t, a)
	if got := strings.TrimSpace(readSysctl(t, e.host, "net/ipv6/conf/up1/accept_ra")); got != "1" {
		t.Errorf("up1 accept_ra = %s, want 1", got)
	}
	if got := strings.TrimSpace(readSysctl(t, e.host, forwardingV6)); got != "0" {
		t.Errorf("all.forwarding = %s, want 0", got)
	}
}

// A pod sends the node a router advertisement on a node whose IPv6
// forwarding is off (only IPv4 pods): its host veth receives it and installs
// nothing.
func TestPodCannotAdvertiseARouteToTheNode(t *testing.T) {
	e := newRAEnv(t)
	a, podNS := e.pod(t, "v4", "eth0", addr("10.0.0.10/24"))
	e.add(t, a)
	hv := hostVeth(a)
	if got := strings.TrimSpace(readSysctl(t, e.host, forwardingV6)); got != "0" {
		t.Fatalf("all.forwarding = %s, want 0", got)
	}
	if got := strings.TrimSpace(readSysctl(t, e.host, "net/ipv6/conf/"+hv+"/accept_ra")); got != "0" {
		t.Errorf("%s accept_ra = %s, want 0", hv, got)
	}
	ipCmd(t, podNS, "addr", "add", "fe80::99/64", "dev", "eth0", "nodad")
	before := rasReceived(t, e.host, hv)
	deadline := time.Now().Add(10 * time.Second)
	for rasReceived(t, e.host, hv) == before {
		if err := sendRA(podNS, "eth0"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s received no router advertisement within 10s", hv)
		}
		time.Sleep(100 * time.Millisecond) // pace the advertisements
	}
	if r := ipCmd(t, e.host, "-6", "route", "show", "default"); strings.Contains(r, "proto ra") {
		t.Errorf("the pod's advertisement gave the node a route:\n%s", r)
	}
	if as := ipCmd(t, e.host, "-6", "addr", "show", "dev", hv); strings.Contains(as, "fd55::") {
		t.Errorf("the pod's advertisement gave the node an address:\n%s", as)
	}
}

// rasReceived is the link's Icmp6InRouterAdvertisements counter in ns.
func rasReceived(t *testing.T, ns, dev string) string {
	t.Helper()
	out := nstest.Exec(t, ns, "cat", "/proc/net/dev_snmp6/"+dev)
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Icmp6InRouterAdvertisements" {
			return f[1]
		}
	}
	t.Fatalf("no Icmp6InRouterAdvertisements for %s in\n%s", dev, out)
	return ""
}

// sendRA sends one router advertisement from fe80::99 on dev in ns: router
// lifetime 1800 s and the autonomous prefix fd55::/64.
func sendRA(ns, dev string) error {
	return nsrun.Do(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		c, err := icmp.ListenPacket("ip6:ipv6-icmp", "fe80::99%"+dev)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		defer func() { _ = c.Close() }()
		pc := c.IPv6PacketConn()
		if err := pc.SetMulticastHopLimit(255); err != nil {
			return err
		}
		if err := pc.SetMulticastInterface(ifi); err != nil {
			return err
		}
		b, err := (&icmp.Message{Type: ipv6.ICMPTypeRouterAdvertisement, Body: &icmp.RawBody{Data: raBody()}}).Marshal(nil)
		if err != nil {
			return err
		}
		dst := &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: dev}
		if _, err := c.WriteTo(b, dst); err != nil {
			return fmt.Errorf("send RA: %w", err)
		}
		return nil
	})
}

// raBody is an RA's body after the ICMPv6 header (RFC 4861 4.2) with one
// prefix information option (4.6.2).
func raBody() []byte {
	b := make([]byte, 12, 12+32)
	b[0] = 64                                // cur hop limit
	binary.BigEndian.PutUint16(b[2:4], 1800) // router lifetime
	opt := make([]byte, 32)
	opt[0], opt[1], opt[2], opt[3] = 3, 4, 64, 0xc0 // type, length in 8 bytes, prefix length, L|A
	binary.BigEndian.PutUint32(opt[4:8], 3600)      // valid lifetime
	binary.BigEndian.PutUint32(opt[8:12], 1800)     // preferred lifetime
	p := netip.MustParseAddr("fd55::").As16()
	copy(opt[16:], p[:])
	return append(b, opt...)
}
