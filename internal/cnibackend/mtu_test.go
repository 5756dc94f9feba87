package cnibackend

import (
	"context"
	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"strconv"
	"strings"
	"testing"
	"time"
)

// linkMTU is the "mtu N" of a link as ip prints it.
func linkMTU(t *testing.T, ns, link string) string {
	t.Helper()
	f := strings.Fields(ipCmd(t, ns, "-o", "link", "show", link))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "mtu" {
			return f[i+1]
		}
	}
	t.Fatalf("no mtu for %s in %v", link, f)
	return ""
}

// A pod whose addresses are all on Underlay networks gets UnderlayMTU on both
// veth ends and in the reply; any overlay address keeps the tunnel's MTU.
func TestMTUByNetworkType(t *testing.T) {
	requireIPv6(t)
	e := newEnv(t)
	b, err := New(Config{Plumber: podnet.NewPlumber(e.host), Addresses: e.addrs, AddressTimeout: 2 * time.Second, MTU: 1450, UnderlayMTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	under := addr("10.0.0.7/24")
	under.Underlay = true
	under6 := addr("fd00::7/64")
	under6.Underlay = true
	cases := []struct {
		name  string
		addrs []ipwait.Address
		want  string
	}{
		{"overlay", []ipwait.Address{addr("10.0.0.5/24")}, "1450"},
		{"underlay", []ipwait.Address{under}, "1500"},
		{"underlay-dual", []ipwait.Address{under, under6}, "1500"},
		{"mixed", []ipwait.Address{under, addr("fd00::5/64")}, "1450"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, podNS := e.pod(t, c.name, "eth0", c.addrs...)
			r, err := e.b.Add(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
			if got := linkMTU(t, podNS, "eth0"); got != c.want {
				t.Errorf("pod eth0 mtu = %s, want %s", got, c.want)
			}
			if got := linkMTU(t, e.host, hostVeth(a)); got != c.want {
				t.Errorf("host veth mtu = %s, want %s", got, c.want)
			}
			for _, i := range r.Interfaces {
				if got := strconv.Itoa(int(i.GetMtu())); got != c.want {
					t.Errorf("reply interface %s mtu = %s, want %s", i.Name, got, c.want)
				}
			}
		})
	}
}
