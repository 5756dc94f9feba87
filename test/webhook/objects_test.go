package webhook

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

const (
	vlan = estuaryv1.NetworkModeVLAN
	bgp  = estuaryv1.NetworkModeBGP

	annNet  = estuaryv1.AnnotationNetwork
	annSub  = estuaryv1.AnnotationSubnet
	annType = estuaryv1.AnnotationNetworkType
	annFam  = estuaryv1.AnnotationIPFamily
)

func overlayNet(name string) *estuaryv1.Network {
	return &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](4)}}
}

// underlayNet builds an Underlay network; mode "" leaves the mode to its
// default (VLAN). A BGP network gets an AS number and one peer.
func underlayNet(name string, mode estuaryv1.NetworkMode, sel map[string]string) *estuaryv1.Network {
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: mode, NodeSelector: sel}}
	if mode == bgp {
		n.Spec.NetID = ptr.To[int64](64600)
		n.Spec.BGPPeers = []estuaryv1.BGPPeer{{Address: "10.255.0.1", ASN: 64512}}
	}
	return n
}

func nodeObj(name string, lbls map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

type subnetOpt func(*estuaryv1.Subnet)

func span(start, end string) subnetOpt {
	return func(s *estuaryv1.Subnet) {
		s.Spec.Range.Start, s.Spec.Range.End = estuaryv1.IPAddress(start), estuaryv1.IPAddress(end)
	}
}

func gw(ip string) subnetOpt {
	return func(s *estuaryv1.Subnet) { s.Spec.Range.Gateway = estuaryv1.IPAddress(ip) }
}

func vlanID(id int64) subnetOpt {
	return func(s *estuaryv1.Subnet) { s.Spec.NetID = ptr.To(id) }
}

func version(v int32) subnetOpt {
	return func(s *estuaryv1.Subnet) { s.Spec.Range.Version = v }
}

func subnetObj(name, network, cidr string, opts ...subnetOpt) *estuaryv1.Subnet {
	v := int32(4)
	for _, c := range cidr {
		if c == ':' {
			v = 6
		}
	}
	s := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.SubnetSpec{Network: network, Range: estuaryv1.AddressRange{Version: v, CIDR: cidr}}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// instance records address ip (with its prefix length) from subnet for pod
// ns/name.
func instance(ns, name, network, subnet, ip string) *estuaryv1.IPInstance {
	return &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(netip.MustParsePrefix(ip).Addr())},
		Spec: estuaryv1.IPInstanceSpec{
			Network: network, Subnet: subnet,
			Address: estuaryv1.InstanceAddress{IP: ip, Version: 4},
			Binding: estuaryv1.Binding{Namespace: ns, Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: name, UID: "u-" + name}, PodName: name},
		},
	}
}

func nsObj(name string, ann map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
}

type podOpt func(*corev1.Pod)

func podObj(ns, name string, ann map[string]string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withAffinity(a *corev1.Affinity) podOpt {
	return func(p *corev1.Pod) { p.Spec.Affinity = a }
}

func generated(prefix string) podOpt {
	return func(p *corev1.Pod) { p.Name, p.GenerateName = "", prefix }
}

func sel(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
