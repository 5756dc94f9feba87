package chart

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestDaemonUplinkLists: underlay.vlanUplinks, underlay.bgpUplinks and
// overlay.vxlanParents become the daemon's --vlan-uplinks, --bgp-uplinks and
// --vxlan-parents in their order, next to the single underlay.uplink, which
// keeps rendering as before; empty lists are left out.
func TestDaemonUplinkLists(t *testing.T) {
	daemonArgs := func(args ...string) []string {
		var ds appsv1.DaemonSet
		convert(t, find(t, render(t, args...), "DaemonSet", "estuary-daemon"), &ds)
		return ds.Spec.Template.Spec.Containers[0].Args
	}
	lists := []string{"--vlan-uplinks=", "--bgp-uplinks=", "--vxlan-parents="}
	for _, a := range daemonArgs() {
		for _, l := range lists {
			if strings.HasPrefix(a, l) {
				t.Errorf("default: %s, want no list flag", a)
			}
		}
	}
	args := daemonArgs("--set-json", `underlay.vlanUplinks=["bond0","ens5f0","eth0"]`, "--set-json", `underlay.bgpUplinks=["ens5"]`,
		"--set-json", `overlay.vxlanParents=["bond0","eth0"]`, "--set", "underlay.uplink=eth1")
	for _, want := range []string{"--vlan-uplinks=bond0,ens5f0,eth0", "--bgp-uplinks=ens5", "--vxlan-parents=bond0,eth0", "--underlay-uplink=eth1"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
}

// TestDaemonUplinkListsRefused: an empty name, a name over 15 bytes, or one
// with a slash or a space fails the render naming the value's place.
func TestDaemonUplinkListsRefused(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{`underlay.vlanUplinks=["eth0",""]`, "/underlay/vlanUplinks/1"},
		{`underlay.bgpUplinks=["abcdefghijklmnop"]`, "/underlay/bgpUplinks/0"},
		{`overlay.vxlanParents=["eth0/1"]`, "/overlay/vxlanParents/0"},
		{`underlay.vlanUplinks=["eth 0"]`, "/underlay/vlanUplinks/0"},
	} {
		_, err := renderErr(t, "--set-json", c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a schema error at %s", c.set, err, c.want)
		}
	}
}
