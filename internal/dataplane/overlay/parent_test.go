package overlay

import (
	"reflect"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/test/infra/nstest"
)

func TestResolveParent(t *testing.T) {
	ns := nstest.New(t)
	nstest.IP(t, ns, "link", "set", "lo", "up")
	for _, l := range []string{"bond0", "uplink0", "uplink1"} {
		nstest.IP(t, ns, "link", "add", l, "type", "veth", "peer", "name", "p"+l)
		nstest.IP(t, ns, "link", "set", l, "up")
	}
	nstest.IP(t, ns, "addr", "add", "192.168.7.2/24", "dev", "uplink1")
	nstest.IP(t, ns, "addr", "add", "10.1.0.5/24", "dev", "bond0")
	nstest.IP(t, ns, "link", "set", "bond0", "mtu", "9000")
	a, err := NewAgent(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	if _, err := a.ResolveParent(ParentSpec{}); err == nil || !strings.Contains(err.Error(), "default route") {
		t.Errorf("no default route: err = %v", err)
	}
	nstest.IP(t, ns, "route", "add", "default", "via", "10.1.0.1", "dev", "bond0")
	for _, tc := range []struct {
		spec ParentSpec
		want Parent
	}{
		{ParentSpec{}, Parent{Link: "bond0", IP: ip("10.1.0.5"), MTU: 9000}},
		{ParentSpec{Name: "uplink1"}, Parent{Link: "uplink1", IP: ip("192.168.7.2"), MTU: 1500}},
		{ParentSpec{Regex: "^uplink"}, Parent{Link: "uplink1", IP: ip("192.168.7.2"), MTU: 1500}},
	} {
		got, err := a.ResolveParent(tc.spec)
		if len(got.Prefixes) == 0 || got.Prefixes[0].Addr() != got.IP || got.Prefixes[0].Bits() != 24 {
			t.Errorf("ResolveParent(%+v).Prefixes = %v, want %s/24 first", tc.spec, got.Prefixes, got.IP)
		}
		got.Prefixes = nil
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ResolveParent(%+v) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec ParentSpec
		want string
	}{
		{ParentSpec{Name: "uplink0"}, `parent "uplink0": link uplink0 has no global unicast address`},
		{ParentSpec{Name: "nope"}, `parent "nope"`},
		{ParentSpec{Regex: "^wan"}, `parent matching "^wan"`},
		{ParentSpec{Regex: "("}, `parent matching "("`},
	} {
		if _, err := a.ResolveParent(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ResolveParent(%+v) err = %v, want it to contain %q", tc.spec, err, tc.want)
		}
	}
}
