package cnibackend

import (
	"net"
	"net/netip"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
)

// TestReplyNamesThePodInterface: the result lists the host veth without a
// sandbox and the pod's interface under the attachment's ifname with
// sandbox = the pod's netns, and every address (both families) points at
// the pod's interface, as the CNI spec says; chained plugins (tuning, a
// mesh's CNI) look the container interface up this way.
func TestReplyNamesThePodInterface(t *testing.T) {
	s := podnet.Spec{ContainerID: "c1", IfName: "net1", Netns: "/var/run/netns/cni-1", MTU: 1450}
	ifc := podnet.Interface{
		Host: podnet.Link{Name: "est0123456789a", MAC: net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}},
		Pod:  podnet.Link{Name: "net1", MAC: net.HardwareAddr{0x02, 0x42, 0x0a, 0, 0, 7}},
		Addrs: []podnet.PodAddr{
			{Prefix: netip.MustParsePrefix("10.0.0.7/32"), Gateway: netip.MustParseAddr("169.254.1.1")},
			{Prefix: netip.MustParsePrefix("fd00::7/128"), Gateway: netip.MustParseAddr("fe80::ecee:eeff:feee:eeee")},
		},
	}
	r := reply(ifc, s)
	if len(r.Interfaces) != 2 {
		t.Fatalf("interfaces = %v, want the host veth and the pod's interface", r.Interfaces)
	}
	if h := r.Interfaces[0]; h.Name != "est0123456789a" || h.Sandbox != "" {
		t.Errorf("interface 0 = %v, want the host veth with no sandbox", h)
	}
	if p := r.Interfaces[1]; p.Name != "net1" || p.Sandbox != "/var/run/netns/cni-1" || p.Mac != "02:42:0a:00:00:07" || p.Mtu != 1450 {
		t.Errorf("interface 1 = %v, want net1 in sandbox /var/run/netns/cni-1", p)
	}
	if len(r.Ips) != 2 {
		t.Fatalf("ips = %v", r.Ips)
	}
	for _, ip := range r.Ips {
		if ip.Interface == nil || ip.GetInterface() != 1 {
			t.Errorf("ip %s points at interface %v, want 1 (the pod's)", ip.GetAddress(), ip.Interface)
		}
	}
}
