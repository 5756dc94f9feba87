package webhook

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

func overlay(name string) estuaryv1.Network {
	return estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](4)}}
}

func underlay(name string, mode estuaryv1.NetworkMode, sel map[string]string) estuaryv1.Network {
	n := estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: mode, NodeSelector: sel}}
	if mode == estuaryv1.NetworkModeBGP {
		n.Spec.NetID = ptr.To[int64](64600)
		n.Spec.BGPPeers = []estuaryv1.BGPPeer{{Address: "10.0.0.1", ASN: 64512}}
	}
	return n
}

func node(name string, lbls map[string]string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

// subnet builds a subnet; rng is "cidr[,start,end[,gateway]]" with empty
// parts meaning unset.
func subnet(name, network, rng string) estuaryv1.Subnet {
	parts := append(strings.Split(rng, ","), "", "", "")
	version := int32(4)
	if strings.Contains(parts[0], ":") {
		version = 6
	}
	return estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: estuaryv1.SubnetSpec{
		Network: network,
		Range: estuaryv1.AddressRange{Version: version, CIDR: parts[0],
			Start: estuaryv1.IPAddress(parts[1]), End: estuaryv1.IPAddress(parts[2]), Gateway: estuaryv1.IPAddress(parts[3])},
	}}
}

func instance(ns, name, subnet string) estuaryv1.IPInstance {
	return estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.IPInstanceSpec{Network: "n", Subnet: subnet, Binding: estuaryv1.Binding{Namespace: ns, PodName: "p-" + name}}}
}

// requireDenied asserts err holds a *netmodel.Denial and that its text has every one
// of want.
func requireDenied(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a denial with %q", want)
	}
	var d *netmodel.Denial
	if !errors.As(err, &d) {
		t.Fatalf("error is not a *netmodel.Denial: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial does not say %q: %v", w, err)
		}
	}
}

func requireAdmitted(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("denied: %v", err)
	}
}
