package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPInstancePhase says whether an address is in use by a pod or held for one.
// +kubebuilder:validation:Enum=Bound;Retained
type IPInstancePhase string

// IPInstance phases.
const (
	// IPInstanceBound: the address belongs to a running (or starting) pod.
	IPInstanceBound IPInstancePhase = "Bound"
	// IPInstanceRetained: the pod is gone but its owner (a StatefulSet) holds
	// the address for the pod that will take its place.
	IPInstanceRetained IPInstancePhase = "Retained"
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
	// UID of the owner.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=36
	UID string `json:"uid"`
}

// Binding says who an address belongs to and where it is used.
type Binding struct {
	// Namespace is the namespace of the pod and of its owner. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="namespace is immutable"
	Namespace string `json:"namespace"`
	// Owner is the workload that owns the address: the StatefulSet for a
	// stateful pod, otherwise the pod itself.
	// +required
	Owner OwnerReference `json:"owner"`
	// PodName is the pod that uses (or, when Retained, will use) the address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName"`
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
}

// IPInstanceStatus is the address's state.
type IPInstanceStatus struct {
	// Phase is Bound while a pod uses the address, Retained while its owner
	// holds it for the next pod.
	// +optional
	Phase IPInstancePhase `json:"phase,omitempty"`
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
// +kubebuilder:resource:scope=Cluster,shortName=ipi
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.spec.address.ip) || self.metadata.name == (((self.spec.address.ip.split('/')[0].replace(':', '-')).startsWith('-') ? '0' + self.spec.address.ip.split('/')[0].replace(':', '-') : self.spec.address.ip.split('/')[0].replace(':', '-')).endsWith('-') ? ((self.spec.address.ip.split('/')[0].replace(':', '-')).startsWith('-') ? '0' + self.spec.address.ip.split('/')[0].replace(':', '-') : self.spec.address.ip.split('/')[0].replace(':', '-')) + '0' : ((self.spec.address.ip.split('/')[0].replace(':', '-')).startsWith('-') ? '0' + self.spec.address.ip.split('/')[0].replace(':', '-') : self.spec.address.ip.split('/')[0].replace(':', '-')))",message="metadata.name must be the address of spec.address.ip, with an IPv6 address's colons written as dashes (10.10.0.7, fd00-1--7)"
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.spec.address.ip`
// +kubebuilder:printcolumn:name="Subnet",type=string,JSONPath=`.spec.subnet`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.binding.namespace`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.binding.podName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.binding.nodeName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
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
