package migrate

// Networks: hybridnet's type and mode (its defaults made explicit: an
// unset type is Underlay, an unset mode the type's), netID, node selector
// and BGP peers carry over one to one. A peer's plain-text password moves
// into a Secret, one per network (key: the peer's address, colons as
// dashes), that the peer's passwordSecretRef names; the daemon reads only
// the Secrets the chart's underlay.bgpPasswordSecrets lists, which the
// report says. A peer's doesNotRouteTraffic carries over as it is;
// hybridnet's wait rule (a pod waits until every peer without
// allowNotEstablished is Established) becomes requireEstablished on each
// such peer, and bgpWaitForPeer false when every peer allows it.
//
// A GlobalBGP network becomes estuary's GlobalBGP network (mode unset); a
// netID on it, which hybridnet's own webhook refuses and which means
// nothing there, is reported and dropped.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/webhook"
)

// Limits of estuary's API the translation checks before the API server
// would.
const (
	maxVNI             = 1<<24 - 1
	maxVLAN            = 4094
	maxGracefulRestart = 4095
	maxPeers           = 16
	maxSelectorLabels  = 32
)

func (t *translator) network(u *unstructured.Unstructured) {
	obj := objectName("Network", u)
	var hn hnNetwork
	unknown, err := decodeSpec(u, networkShape, &hn)
	if err != nil {
		t.out.Report.skip(obj, "", "cannot be read: %v", err)
		return
	}
	for _, f := range unknown {
		t.out.Report.skip(obj, f, "a field kubectl estuary migrate does not know; not migrated")
	}
	n := &estuaryv1.Network{ObjectMeta: objectMeta(u.GetName())}
	n.SetGroupVersionKind(estuaryv1.GroupVersion.WithKind("Network"))
	if hn.Type == string(estuaryv1.NetworkTypeGlobalBGP) && hn.NetID != nil {
		t.out.Report.skip(obj, "spec.netID", "%d: a GlobalBGP network takes no netID (hybridnet's webhook refuses one too); "+
			"each node announces its GlobalBGP pods with its own BGP network's AS number", *hn.NetID)
		hn.NetID = nil
	}
	if why := networkSpec(&hn, n); why != "" {
		t.out.Report.skip(obj, "", "%s", why)
		return
	}
	secret := t.peers(obj, &hn, n)
	if err := webhook.ValidateNetwork(n, t.allNetworks(n.Name), t.in.Existing.Nodes); err != nil {
		t.out.Report.skip(obj, "", "estuary's admission webhook would refuse it: %v", err)
		return
	}
	if secret != nil {
		t.out.Secrets = append(t.out.Secrets, secret)
		t.out.Report.note(obj, "spec.config.bgpPeers[*].password",
			"moved into Secret %s/%s; add {namespace: %s, name: %s} to the chart's underlay.bgpPasswordSecrets so the daemons may read it",
			secret.Namespace, secret.Name, secret.Namespace, secret.Name)
	}
	t.networks[n.Name] = n
	t.out.Networks = append(t.out.Networks, n)
}

// networkSpec fills n's type, mode, netID and node selector from hn, or
// says why the network cannot be migrated.
func networkSpec(hn *hnNetwork, n *estuaryv1.Network) string {
	typ := hn.Type
	if typ == "" {
		typ = string(estuaryv1.NetworkTypeUnderlay) // hybridnet's default
	}
	switch typ {
	case string(estuaryv1.NetworkTypeOverlay):
		n.Spec.Type = estuaryv1.NetworkTypeOverlay
		if hn.Mode != "" && hn.Mode != string(estuaryv1.NetworkModeVXLAN) {
			return fmt.Sprintf("spec.mode %s: an Overlay network's mode is VXLAN in estuary", hn.Mode)
		}
		n.Spec.Mode = estuaryv1.NetworkModeVXLAN
	case string(estuaryv1.NetworkTypeUnderlay):
		n.Spec.Type = estuaryv1.NetworkTypeUnderlay
		switch hn.Mode {
		case "", string(estuaryv1.NetworkModeVLAN):
			n.Spec.Mode = estuaryv1.NetworkModeVLAN
		case string(estuaryv1.NetworkModeBGP):
			n.Spec.Mode = estuaryv1.NetworkModeBGP
		default:
			return fmt.Sprintf("spec.mode %s: an Underlay network's mode is VLAN or BGP in estuary", hn.Mode)
		}
	case string(estuaryv1.NetworkTypeGlobalBGP):
		n.Spec.Type = estuaryv1.NetworkTypeGlobalBGP
		if hn.Mode != "" && hn.Mode != string(estuaryv1.NetworkTypeGlobalBGP) {
			return fmt.Sprintf("spec.mode %s: a GlobalBGP network's mode is GlobalBGP in hybridnet and unset in estuary", hn.Mode)
		}
	default:
		return fmt.Sprintf("spec.type %q is not a hybridnet network type", hn.Type)
	}
	if why := netID(n, hn.NetID); why != "" {
		return why
	}
	switch {
	case n.Spec.Type != estuaryv1.NetworkTypeUnderlay && len(hn.NodeSelector) > 0:
		article := "a"
		if n.Spec.Type == estuaryv1.NetworkTypeOverlay {
			article = "an"
		}
		return fmt.Sprintf("spec.nodeSelector: %s %s network spans every node and takes no node selector", article, n.Spec.Type)
	case n.Spec.Type == estuaryv1.NetworkTypeUnderlay && len(hn.NodeSelector) == 0:
		return "spec.nodeSelector is empty: an Underlay network needs one naming the nodes of its domain"
	case len(hn.NodeSelector) > maxSelectorLabels:
		return fmt.Sprintf("spec.nodeSelector has %d labels; estuary takes at most %d", len(hn.NodeSelector), maxSelectorLabels)
	}
	n.Spec.NodeSelector = hn.NodeSelector
	return ""
}

// netID sets n's netID from hybridnet's, or says why it does not fit the
// network's mode.
func netID(n *estuaryv1.Network, id *int32) string {
	if id != nil {
		n.Spec.NetID = ptr.To(int64(*id))
	}
	switch n.Spec.Mode {
	case estuaryv1.NetworkModeVXLAN:
		if id == nil || *id < 1 || *id > maxVNI {
			return fmt.Sprintf("spec.netID %s: a VXLAN network needs its VNI, from 1 to %d", show(id), maxVNI)
		}
	case estuaryv1.NetworkModeVLAN:
		if id != nil && (*id < 0 || *id > maxVLAN) {
			return fmt.Sprintf("spec.netID %d: a VLAN id is 0 (untagged) to %d", *id, maxVLAN)
		}
	case estuaryv1.NetworkModeBGP:
		if id == nil || *id < 1 {
			return fmt.Sprintf("spec.netID %s: a BGP network needs the nodes' AS number", show(id))
		}
	}
	return ""
}

func show(id *int32) string {
	if id == nil {
		return "unset"
	}
	return fmt.Sprint(*id)
}

// peers copies hn's BGP peers into n, moving passwords into the Secret it
// returns (nil when no peer has one). A peer estuary cannot take is
// reported and left out.
func (t *translator) peers(obj string, hn *hnNetwork, n *estuaryv1.Network) *corev1.Secret {
	if hn.Config == nil || len(hn.Config.BGPPeers) == 0 {
		return nil
	}
	if n.Spec.Mode != estuaryv1.NetworkModeBGP {
		t.out.Report.skip(obj, "spec.config.bgpPeers", "only a BGP network's peers mean anything (hybridnet ignores them too)")
		return nil
	}
	secret := &corev1.Secret{ObjectMeta: objectMeta(n.Name + "-bgp-passwords"), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	secret.Namespace = t.in.SecretNamespace
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	for i, p := range hn.Config.BGPPeers {
		field := fmt.Sprintf("spec.config.bgpPeers[%d]", i)
		a, err := netip.ParseAddr(p.Address)
		switch {
		case err != nil || a.Zone() != "":
			t.out.Report.skip(obj, field, "address %q is not an IP address; peer not migrated", p.Address)
			continue
		case p.ASN < 1:
			t.out.Report.skip(obj, field, "asn %d is not an AS number; peer not migrated", p.ASN)
			continue
		case len(n.Spec.BGPPeers) == maxPeers:
			t.out.Report.skip(obj, field, "estuary takes at most %d peers; peer not migrated", maxPeers)
			continue
		case hasPeer(n, a.Unmap().String()):
			t.out.Report.skip(obj, field, "peer %s is listed twice; the first is migrated", a)
			continue
		}
		peer := estuaryv1.BGPPeer{Address: a.Unmap().String(), ASN: int64(p.ASN)}
		switch g := p.GracefulRestartSeconds; {
		case g > maxGracefulRestart:
			t.out.Report.skip(obj, field+".gracefulRestartSeconds", "%d is over %d, the most RFC 4724 allows; left unset (the daemon's default)", g, maxGracefulRestart)
		case g > 0:
			peer.GracefulRestartSeconds = ptr.To(g)
		}
		peer.DoesNotRouteTraffic = p.DoesNotRouteTraffic
		peer.RequireEstablished = !p.AllowNotEstablished
		if p.Password != "" {
			key := strings.ReplaceAll(peer.Address, ":", "-")
			secret.Data[key] = []byte(p.Password)
			peer.PasswordSecretRef = &estuaryv1.SecretKeyReference{Namespace: secret.Namespace, Name: secret.Name, Key: key}
		}
		n.Spec.BGPPeers = append(n.Spec.BGPPeers, peer)
	}
	t.peerKnobs(obj, n)
	if len(secret.Data) == 0 {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(secret.Name); len(errs) > 0 {
		t.out.Report.skip(obj, "spec.config.bgpPeers[*].password", "Secret name %q: %s; the passwords are not migrated", secret.Name, strings.Join(errs, "; "))
		for i := range n.Spec.BGPPeers {
			n.Spec.BGPPeers[i].PasswordSecretRef = nil
		}
		return nil
	}
	return secret
}

// peerKnobs makes the migrated peers' knobs valid in estuary: when no peer
// requires an Established session (hybridnet lets pods start with every
// peer down) the network waits for none; when no peer routes traffic
// (hybridnet's pods then have no default route) the flag is dropped and
// reported.
func (t *translator) peerKnobs(obj string, n *estuaryv1.Network) {
	peers := n.Spec.BGPPeers
	if len(peers) == 0 {
		return
	}
	if !slices.ContainsFunc(peers, func(p estuaryv1.BGPPeer) bool { return p.RequireEstablished }) {
		n.Spec.BGPWaitForPeer = ptr.To(false)
	}
	if !slices.ContainsFunc(peers, func(p estuaryv1.BGPPeer) bool { return !p.DoesNotRouteTraffic }) {
		t.out.Report.skip(obj, "spec.config.bgpPeers[*].doesNotRouteTraffic",
			"true on every peer leaves hybridnet's pods without a default route; estuary needs one peer that routes traffic, so the flag is dropped")
		for i := range peers {
			peers[i].DoesNotRouteTraffic = false
		}
	}
}

func hasPeer(n *estuaryv1.Network, addr string) bool {
	for _, p := range n.Spec.BGPPeers {
		if p.Address == addr {
			return true
		}
	}
	return false
}

// allNetworks are the networks a new one is checked against: the existing
// ones and those migrated so far, but none named name (the one checked, or
// an existing one of that name, which the write compares instead).
func (t *translator) allNetworks(name string) []estuaryv1.Network {
	var out []estuaryv1.Network
	for _, n := range t.in.Existing.Networks {
		if n.Name != name && t.networks[n.Name] == nil {
			out = append(out, n)
		}
	}
	for _, n := range t.out.Networks {
		if n.Name != name {
			out = append(out, *n)
		}
	}
	return out
}
