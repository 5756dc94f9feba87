// Package objtest builds the API objects the data path's tests feed to
// package translate and to the loop: networks, subnets, nodes with their
// published tunnel endpoints, and address records. For tests only.
package objtest

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
)

// Network is a Network of type typ with netID.
func Network(name string, typ estuaryv1.NetworkType, netID int64) estuaryv1.Network {
	return estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: typ, NetID: &netID}}
}

// Subnet is a Subnet of net with cidr and natOutgoing nat.
func Subnet(name, net, cidr string, nat *bool) estuaryv1.Subnet {
	return estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.SubnetSpec{Network: net, Range: estuaryv1.AddressRange{CIDR: cidr}, NATOutgoing: nat}}
}

// Node is a node publishing the tunnel endpoint vtepIP/vtepMAC (none when
// vtepIP is empty) with the internal addresses internal and its hostname.
func Node(name, vtepIP, vtepMAC string, internal ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if vtepIP != "" {
		n.Annotations[estuaryv1.AnnotationVTEPIP] = vtepIP
		n.Annotations[estuaryv1.AnnotationVTEPMAC] = vtepMAC
	}
	for _, a := range internal {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

// Instance is a record of ip on nodeName in phase.
func Instance(ip, nodeName string, phase estuaryv1.IPInstancePhase) estuaryv1.IPInstance {
	return estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: map[string]string{estuaryv1.LabelNode: nodeName}},
		Spec:       estuaryv1.IPInstanceSpec{Address: estuaryv1.InstanceAddress{IP: ip}},
		Status:     estuaryv1.IPInstanceStatus{Phase: phase},
	}
}

// Labelled is n with labels.
func Labelled(n corev1.Node, labels map[string]string) corev1.Node {
	n.Labels = labels
	return n
}

// UnderlayNet is an Underlay network of mode and netID whose domain is sel.
func UnderlayNet(name string, mode estuaryv1.NetworkMode, netID int64, sel map[string]string) estuaryv1.Network {
	n := Network(name, estuaryv1.NetworkTypeUnderlay, netID)
	n.Spec.Mode, n.Spec.NodeSelector = mode, sel
	return n
}

// BGPNet is a BGP-mode Underlay network of AS asn whose domain is sel, with
// peers at AS 65000.
func BGPNet(name string, asn int64, sel map[string]string, peers ...string) estuaryv1.Network {
	n := UnderlayNet(name, estuaryv1.NetworkModeBGP, asn, sel)
	for _, p := range peers {
		n.Spec.BGPPeers = append(n.Spec.BGPPeers, estuaryv1.BGPPeer{Address: p, ASN: 65000})
	}
	return n
}

// Addrs parses addresses.
func Addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// Ptrs are pointers to copies of vs, as Objects holds Nodes.
func Ptrs[T any](vs ...T) []*T {
	out := make([]*T, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}

// Records are what the node's cache keeps of ipis, records of other nodes.
func Records(ipis ...estuaryv1.IPInstance) []*remote.Record {
	out := make([]*remote.Record, len(ipis))
	for i := range ipis {
		out[i] = remote.FromInstance(&ipis[i])
	}
	return out
}
