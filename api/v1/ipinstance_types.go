package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPInstancePhase says whether an address is in use by a pod or held for one.
// +kubebuilder:validation:Enum=Bound;Retained;Reserved
type IPInstancePhase string

// IPInstance phases.
const (
	// IPInstanceBound: the address belongs to a running (or starting) pod.
	IPInstanceBound IPInstancePhase = "Bound"
	// IPInstanceRetained: the pod is gone but its owner holds the address
	// for the pod that will take its place, until status.expiresAt if set.
	IPInstanceRetained IPInstancePhase = "Retained"
	// IPInstanceReserved: an administrator holds the address for its owner
	// (spec.reserved), and no pod uses it now. It is handed out only to a
	// pod of that owner, and kept until it is released by hand.
	IPInstanceReserved IPInstancePhase = "Reserved"
)

// InstanceAddress is the address an IPInstance records, with what a node
// needs to plumb it.
type InstanceAddress struct {
	// IP is the address with its subnet's prefix length, e.g. 10.10.0.7/16.
	// Immutable.
	// +required
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && ip.isCanonical(self.split('/')[0])",message="must be an IP address in canonical form with its subnet's prefix length, e.g. 10.10.0.7/16"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ip is immutable"
	IP string `json:"ip"`

	// Version is the address family: 4 or 6.
	// +required
	// +kubebuilder:validation:Enum=4;6
	Version int32 `json:"version"`

	// Gateway is the subnet's gateway, if it has one.
	// +optional
	Gateway IPAddress `json:"gateway,omitempty"`

	// MAC is the pod interface's MAC address, if fixed.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`
	MAC string `json:"mac,omitempty"`

	// NetID is the VLAN id, VNI or AS number of the address's network.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	NetID *int64 `json:"netID,omitempty"`
}

// OwnerReference names the workload that owns an address.
type OwnerReference struct {
	// Kind of the owner, e.g. StatefulSet or Pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name of the owner, in the binding's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the owner; empty for an address reserved before the owner
	// exists.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	UID string `json:"uid,omitempty"`
}

// Binding says who an address belongs to and where it is used.
type Binding struct {
	// Namespace is the namespace of the pod and of its owner. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="namespace is immutable"
	Namespace string `json:"namespace"`
	// Owner is the workload that owns the address: the pod's top-level
	// controller (a StatefulSet, the Deployment of a ReplicaSet, the CronJob
	// of a Job, a DaemonSet, ReplicaSet or Job), or the pod itself.
	// +required
	Owner OwnerReference `json:"owner"`
	// PodName is the pod that uses the address; when Retained, the pod that
	// used it last (a StatefulSet's next pod has the same name); empty for a
	// reservation no pod used yet.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName,omitempty"`
	// PodUID is the UID of the pod that uses the address; empty while Retained.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	PodUID string `json:"podUID,omitempty"`
	// NodeName is the node the pod runs on; empty while Retained.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName,omitempty"`
	// StatefulOrdinal is the pod's ordinal in its StatefulSet.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StatefulOrdinal *int32 `json:"statefulOrdinal,omitempty"`
}

// IPInstanceSpec records one allocated address.
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.address.ip) || cidr(self.address.ip).ip().family() == self.address.version",fieldPath=".address.version",reason=FieldValueInvalid,message="version must match the address family of ip"
// +kubebuilder:validation:XValidation:rule="!has(self.address.gateway) || !isCIDR(self.address.ip) || !isIP(self.address.gateway) || cidr(self.address.ip).masked().containsIP(self.address.gateway)",fieldPath=".address.gateway",reason=FieldValueInvalid,message="gateway must be inside the address's subnet"
type IPInstanceSpec struct {
	// Network is the name of the address's Network. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="network is immutable"
	Network string `json:"network"`
	// Subnet is the name of the address's Subnet. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="subnet is immutable"
	Subnet string `json:"subnet"`
	// Address is the allocated address.
	// +required
	Address InstanceAddress `json:"address"`
	// Binding says who the address belongs to.
	// +required
	Binding Binding `json:"binding"`
	// Retention says what happens to the address when its pod goes. Unset:
	// it is released with the pod, or, for a StatefulSet's pod, kept as
	// long as the StatefulSet has the pod's ordinal.
	// +optional
	Retention *Retention `json:"retention,omitempty"`
	// Reserved marks an address an administrator reserved for the owner:
	// when its pod goes it turns Reserved again, never free.
	// +optional
	Reserved bool `json:"reserved,omitempty"`
}

// Retention is how long an address stays held for its owner once its pod
// is gone.
type Retention struct {
	// TTL is how long the address is kept after its pod went; unset means
	// Never (kept until released by hand or, for a StatefulSet, until it
	// no longer has the ordinal).
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// IPInstanceStatus is the address's state.
type IPInstanceStatus struct {
	// Phase is Bound while a pod uses the address, Retained while its owner
	// holds it for the next pod, Reserved while an administrator's
	// reservation holds it and no pod uses it.
	// +optional
	Phase IPInstancePhase `json:"phase,omitempty"`
	// ExpiresAt is when a Retained address is released, unless a pod of
	// its owner takes it first. Unset: it does not expire.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// IPInstance is the record of one allocated address. The manager writes it
// in the same write that allocates the address, so the status is not a
// subresource; it is read-only for users.
//
// IPInstances are cluster-scoped and named after their address
// (InstanceName), so the API server itself guarantees that one address is
// recorded at most once in the whole cluster: a second create of the same
// address fails with AlreadyExists whichever manager, network or namespace
// it comes from. Uniqueness does not rest on leader election.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ipi,categories=estuary
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.spec.address.ip) || self.metadata.name == (((self.spec.address.ip.split('/')[0].replace(':', '-')).startsWith('-') ? '0' + self.spec.address.ip.split('/')[0].replace(':', '-') : self.spec.address.ip.split('/')[0].replace(':', '-')).endsWith('-') ? ((self.spec.address.ip.split('/')[0].replace(':', '-')).startsWith('-') ? '0' + self.spec.address.ip.split('/')[0].replace(':', '-') : self.spec.address.ip.split('/')[0].replace(':', '-')) + '0' : ((self.spec.address.ip.split('/')[0].replace(':', '-')).startsWith('-') ? '0' + self.spec.address.ip.split('/')[0].replace(':', '-') : self.spec.address.ip.split('/')[0].replace(':', '-')))",message="metadata.name must be the address of spec.address.ip, with an IPv6 address's colons written as dashes (10.10.0.7, fd00-1--7)"
// +kubebuilder:validation:XValidation:rule="(has(self.spec.binding.podName) && size(self.spec.binding.podName) > 0) || (has(self.status) && has(self.status.phase) && self.status.phase == 'Reserved')",fieldPath=".spec.binding.podName",reason=FieldValueRequired,message="podName is required unless the address is Reserved"
// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.status.phase) || self.status.phase != 'Reserved' || (has(self.spec.reserved) && self.spec.reserved)",fieldPath=".spec.reserved",reason=FieldValueInvalid,message="a Reserved address must have spec.reserved set"
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.spec.address.ip`
// +kubebuilder:printcolumn:name="Subnet",type=string,JSONPath=`.spec.subnet`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.binding.namespace`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.binding.podName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.binding.nodeName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.binding.owner.name`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.status.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec IPInstanceSpec `json:"spec"`
	// +optional
	Status IPInstanceStatus `json:"status,omitempty"`
}

// IPInstanceList is a list of IPInstances.
//
// +kubebuilder:object:root=true
type IPInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPInstance `json:"items"`
}
