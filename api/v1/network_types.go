package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkType says whether a network's pods ride a tunnel (Overlay), the
// data centre's own network of a group of nodes (Underlay), or routed host
// addresses usable on every node (GlobalBGP).
// +kubebuilder:validation:Enum=Overlay;Underlay;GlobalBGP
type NetworkType string

// Network types.
const (
	// NetworkTypeOverlay is the cluster-wide VXLAN network that works on any
	// underlying network. A cluster has at most one.
	NetworkTypeOverlay NetworkType = "Overlay"
	// NetworkTypeUnderlay puts pods on the physical network of a group of nodes.
	NetworkTypeUnderlay NetworkType = "Underlay"
	// NetworkTypeGlobalBGP is a pool of addresses usable on every node: each
	// pod's host route (/32 or /128) is announced by the BGP speaker of the
	// BGP-mode Underlay network whose domain holds the pod's node, to that
	// network's peers. A cluster has at most one. It takes no mode, netID,
	// nodeSelector, bgpPeers or bgpWaitForPeer: those of the node's BGP
	// network apply.
	NetworkTypeGlobalBGP NetworkType = "GlobalBGP"
)

// NetworkMode is how a network carries pod traffic.
// +kubebuilder:validation:Enum=VXLAN;VLAN;BGP
type NetworkMode string

// Network modes.
const (
	// NetworkModeVXLAN tunnels pod traffic between nodes (Overlay only).
	NetworkModeVXLAN NetworkMode = "VXLAN"
	// NetworkModeVLAN bridges pods onto an (optionally 802.1Q-tagged) segment
	// (Underlay only).
	NetworkModeVLAN NetworkMode = "VLAN"
	// NetworkModeBGP routes pods by announcing their addresses to BGP peers
	// (Underlay only).
	NetworkModeBGP NetworkMode = "BGP"
)

// NetworkSpec describes a network domain: the nodes it spans and how it
// carries pod traffic.
//
// The mode defaults from the type (Overlay: VXLAN, Underlay: VLAN); setting it
// later to that default is allowed, changing it is not. A GlobalBGP network
// takes no mode, netID or nodeSelector.
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || (self.type == 'Overlay' ? self.mode == 'VXLAN' : self.mode in ['VLAN', 'BGP'])",fieldPath=".mode",reason=FieldValueInvalid,message="Overlay networks use mode VXLAN; Underlay networks use mode VLAN or BGP"
// +kubebuilder:validation:XValidation:rule="self.type != 'GlobalBGP' || !has(self.mode)",fieldPath=".mode",reason=FieldValueForbidden,message="a GlobalBGP network takes no mode: its addresses are announced by the BGP speaker of each node's BGP network"
// +kubebuilder:validation:XValidation:rule="self.type != 'GlobalBGP' || !has(self.netID)",fieldPath=".netID",reason=FieldValueForbidden,message="a GlobalBGP network takes no netID: each node announces its addresses with the AS number of its own BGP network"
// +kubebuilder:validation:XValidation:rule="self.type != 'GlobalBGP' || !has(self.nodeSelector) || size(self.nodeSelector) == 0",fieldPath=".nodeSelector",reason=FieldValueForbidden,message="a GlobalBGP network spans every node and takes no nodeSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.bgpPeers) || self.bgpPeers.exists(p, !has(p.doesNotRouteTraffic) || !p.doesNotRouteTraffic)",fieldPath=".bgpPeers",reason=FieldValueInvalid,message="at least one of bgpPeers must route traffic (doesNotRouteTraffic unset or false): the network's pods leave through it"
// +kubebuilder:validation:XValidation:rule="!has(self.bgpWaitForPeer) || self.bgpWaitForPeer || !has(self.bgpPeers) || !self.bgpPeers.exists(p, has(p.requireEstablished) && p.requireEstablished)",fieldPath=".bgpPeers",reason=FieldValueInvalid,message="requireEstablished has no effect while bgpWaitForPeer is false: pods then wait for no peer"
// +kubebuilder:validation:XValidation:rule="self.type != 'Underlay' || (has(self.nodeSelector) && size(self.nodeSelector) > 0)",fieldPath=".nodeSelector",reason=FieldValueRequired,message="an Underlay network needs a nodeSelector naming the nodes of its domain"
// +kubebuilder:validation:XValidation:rule="self.type != 'Overlay' || !has(self.nodeSelector) || size(self.nodeSelector) == 0",fieldPath=".nodeSelector",reason=FieldValueForbidden,message="an Overlay network spans every node and takes no nodeSelector"
// +kubebuilder:validation:XValidation:rule="(has(self.mode) ? self.mode : (self.type == 'Overlay' ? 'VXLAN' : 'VLAN')) != 'VXLAN' || (has(self.netID) && self.netID >= 1 && self.netID <= 16777215)",fieldPath=".netID",reason=FieldValueInvalid,message="a VXLAN network needs netID, its VNI, from 1 to 16777215"
// +kubebuilder:validation:XValidation:rule="(has(self.mode) ? self.mode : (self.type == 'Overlay' ? 'VXLAN' : 'VLAN')) != 'VLAN' || !has(self.netID) || self.netID <= 4094",fieldPath=".netID",reason=FieldValueInvalid,message="a VLAN network's netID is its VLAN id: 0 (untagged) to 4094"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'BGP' || (has(self.netID) && self.netID >= 1)",fieldPath=".netID",reason=FieldValueRequired,message="a BGP network needs netID, the nodes' local AS number, from 1 to 4294967295"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'BGP' || (has(self.bgpPeers) && size(self.bgpPeers) > 0)",fieldPath=".bgpPeers",reason=FieldValueRequired,message="a BGP network needs at least one peer"
// +kubebuilder:validation:XValidation:rule="(has(self.mode) && self.mode == 'BGP') || !has(self.bgpPeers) || size(self.bgpPeers) == 0",fieldPath=".bgpPeers",reason=FieldValueForbidden,message="bgpPeers are only allowed on a network in mode BGP"
// +kubebuilder:validation:XValidation:rule="(has(self.mode) && self.mode == 'BGP') || !has(self.bgpWaitForPeer)",fieldPath=".bgpWaitForPeer",reason=FieldValueForbidden,message="bgpWaitForPeer is only allowed on a network in mode BGP"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.mode) ? (has(self.mode) && self.mode == oldSelf.mode) : (!has(self.mode) || self.mode == (self.type == 'Overlay' ? 'VXLAN' : 'VLAN'))",fieldPath=".mode",reason=FieldValueForbidden,message="mode is immutable"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.netID) == has(self.netID) && (!has(self.netID) || self.netID == oldSelf.netID)",fieldPath=".netID",reason=FieldValueForbidden,message="netID is immutable"
type NetworkSpec struct {
	// Type is Overlay, Underlay or GlobalBGP. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable"
	Type NetworkType `json:"type"`

	// Mode is VXLAN for an Overlay network, VLAN or BGP for an Underlay one.
	// Empty means the type's default: VXLAN for Overlay, VLAN for Underlay.
	// Immutable once set.
	// +optional
	Mode NetworkMode `json:"mode,omitempty"`

	// NetID is the VXLAN VNI (1-16777215), the VLAN id (0-4094, 0 meaning
	// untagged, the default) or the nodes' local BGP AS number (1-4294967295).
	// Immutable.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	NetID *int64 `json:"netID,omitempty"`

	// NodeSelector picks the nodes of an Underlay network's domain: a pod with
	// an address from this network may run on any of them and on no other.
	// Required for Underlay, forbidden for Overlay (which spans every node).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// BGPPeers are the routers the nodes of a BGP network peer with.
	// +optional
	// +listType=map
	// +listMapKey=address
	// +kubebuilder:validation:MaxItems=16
	BGPPeers []BGPPeer `json:"bgpPeers,omitempty"`

	// BGPWaitForPeer says whether a pod of this BGP network, or of the
	// GlobalBGP network on a node of this network's domain, waits, while its
	// node's daemon sets it up, until the node has an Established session
	// with at least one of bgpPeers and with every peer marked
	// requireEstablished, so that its address is announced before it runs.
	// Unset means true. False lets pods start without a session; their
	// addresses are announced once one comes up. Only allowed in mode BGP.
	// +optional
	BGPWaitForPeer *bool `json:"bgpWaitForPeer,omitempty"`

	// Namespaces, when set, are the only namespaces whose pods may use the
	// network: a pod of another namespace that selects it is denied by the
	// admission webhook and gets no address from the manager. Empty means
	// every namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// Retention bounds how long the network's addresses may be kept for a
	// workload whose pods are gone.
	// +optional
	Retention *NetworkRetention `json:"retention,omitempty"`
}

// NetworkRetention is what an administrator allows the network's pods to
// keep. Pods ask with the ip-retain and ip-retain-ttl annotations; the
// manager's --max-retain-ttl bounds every ip-retain-ttl.
type NetworkRetention struct {
	// NeverNamespaceSelector selects the namespaces whose pods may keep
	// this network's addresses with ip-retain-ttl: Never (kept until
	// released by hand or the namespace is deleted, however long the
	// pod's workload is gone). Unset: no namespace; {}: every namespace. A StatefulSet's pods
	// need no permission: what a StatefulSet keeps ends with it. Namespace
	// labels other than kubernetes.io/metadata.name may be writable by the
	// namespace's own users in some clusters; select on that label when
	// they are.
	// +optional
	NeverNamespaceSelector *metav1.LabelSelector `json:"neverNamespaceSelector,omitempty"`
}

// WaitsForBGPPeer reports whether a pod of the network waits for an
// Established BGP session on its node: a BGP network unless bgpWaitForPeer
// is false. A GlobalBGP pod waits as its node's BGP network says.
func (s *NetworkSpec) WaitsForBGPPeer() bool {
	return s.Mode == NetworkModeBGP && (s.BGPWaitForPeer == nil || *s.BGPWaitForPeer)
}

// AnnotationBGPPeers is the Node annotation in which the node's daemon
// publishes the session state of its BGP speakers: a JSON object mapping
// each BGP network whose domain holds the node to its peers
// ([]NodeBGPPeer, ordered by address). Only that node's daemon writes it;
// it is absent while the node runs no speaker.
const AnnotationBGPPeers = "networking.estuary.io/bgp-peers"

// NodeBGPPeer is one peer's session as a node's daemon publishes it in
// AnnotationBGPPeers.
type NodeBGPPeer struct {
	// Address is the peer's IP address.
	Address string `json:"address"`
	// ASN is the peer's AS number.
	ASN int64 `json:"asn"`
	// State is the BGP session state (Idle, Connect, Active, OpenSent,
	// OpenConfirm, Established or Unknown).
	State string `json:"state"`
}

// BGPStateEstablished is NodeBGPPeer.State of a session that is up.
const BGPStateEstablished = "Established"

// ConditionBGPPeersEstablished is the Network condition, on BGP networks,
// that is True when every node of the domain has at least one Established
// session and False (naming the nodes and peers) otherwise.
const ConditionBGPPeersEstablished = "BGPPeersEstablished"

// BGPPeer is one router that the nodes of a BGP network peer with.
type BGPPeer struct {
	// Address is the peer's IP address.
	// +required
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip.isCanonical(self)",message="must be an IP address in canonical form"
	Address string `json:"address"`

	// ASN is the peer's AS number.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	ASN int64 `json:"asn"`

	// PasswordSecretRef names the Secret key holding the TCP MD5 password.
	// +optional
	PasswordSecretRef *SecretKeyReference `json:"passwordSecretRef,omitempty"`

	// GracefulRestartSeconds is the restart time advertised for BGP graceful
	// restart (RFC 4724 allows at most 4095). 0 disables graceful restart;
	// unset means the daemon's default.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4095
	GracefulRestartSeconds *int32 `json:"gracefulRestartSeconds,omitempty"`

	// DoesNotRouteTraffic marks a peer that exchanges routes but forwards no
	// pod traffic (a route reflector, say): it is never the default gateway
	// of the network's pods, which leave through the first other peer on the
	// node's uplink network. At least one peer of a network must route
	// traffic.
	// +optional
	DoesNotRouteTraffic bool `json:"doesNotRouteTraffic,omitempty"`

	// RequireEstablished makes a pod of the network (and a GlobalBGP pod on
	// the network's nodes) wait, while bgpWaitForPeer is not false, until
	// its node's session with this peer is Established, not only one
	// session with any peer. Not allowed with bgpWaitForPeer false.
	// +optional
	RequireEstablished bool `json:"requireEstablished,omitempty"`
}

// SecretKeyReference names one key of a Secret.
type SecretKeyReference struct {
	// Namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key within the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// AddressStatistics counts the addresses of one family.
//
// Total and Available are decimal strings because an IPv6 /64 holds more
// addresses than an int64 can count.
type AddressStatistics struct {
	// Total is the number of addresses pods can be given.
	// +optional
	Total string `json:"total,omitempty"`
	// Used is the number of addresses allocated or retained.
	// +optional
	Used int64 `json:"used,omitempty"`
	// Available is the number of addresses still free for allocation.
	// +optional
	Available string `json:"available,omitempty"`
}

// NetworkStatus is what the manager observes of a network.
type NetworkStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Subnets lists the names of the network's subnets.
	// +optional
	// +listType=set
	Subnets []string `json:"subnets,omitempty"`
	// Nodes lists the nodes in the network's domain.
	// +optional
	// +listType=set
	Nodes []string `json:"nodes,omitempty"`
	// NodeCount is the number of nodes in the domain.
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// IPv4 counts the network's IPv4 addresses.
	// +optional
	IPv4 *AddressStatistics `json:"ipv4,omitempty"`
	// IPv6 counts the network's IPv6 addresses.
	// +optional
	IPv6 *AddressStatistics `json:"ipv6,omitempty"`
	// Used is the number of addresses in use over both families.
	// +optional
	Used int64 `json:"used,omitempty"`
	// Available is the number of free addresses over both families, as a
	// decimal string.
	// +optional
	Available string `json:"available,omitempty"`
	// Conditions are the network's observed conditions.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Network is a network domain: an Overlay spanning every node, an Underlay
// spanning the nodes its selector picks, or the GlobalBGP pool announced
// from every node's BGP network. Subnets hold its addresses.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=net,categories=estuary
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="NetID",type=integer,JSONPath=`.spec.netID`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodeCount`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.used`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.available`
// +kubebuilder:printcolumn:name="BGP",type=string,JSONPath=`.status.conditions[?(@.type=="BGPPeersEstablished")].status`,description="BGPPeersEstablished: True when every node of a BGP network's domain has a session up"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Network struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NetworkSpec `json:"spec"`
	// +optional
	Status NetworkStatus `json:"status,omitempty"`
}

// NetworkList is a list of Networks.
//
// +kubebuilder:object:root=true
type NetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Network `json:"items"`
}
