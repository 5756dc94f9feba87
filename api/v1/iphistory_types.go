package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddressMove is what happened to an address in one IPHistory entry.
// +kubebuilder:validation:Enum=Allocated;HandedOver;Kept;Released
type AddressMove string

// Address moves, one per write of the address's IPInstance that changes
// its holder.
const (
	// MoveAllocated: the address was given to a pod from the free pool.
	MoveAllocated AddressMove = "Allocated"
	// MoveHandedOver: a kept address (or one bound to an earlier pod of
	// the same workload or virtual machine) was given to the entry's pod.
	MoveHandedOver AddressMove = "HandedOver"
	// MoveKept: the pod went and its workload (or a reservation) keeps the
	// address for the next pod; the entry names the pod that held it last.
	MoveKept AddressMove = "Kept"
	// MoveReleased: the address went back to the free pool.
	MoveReleased AddressMove = "Released"
)

// AddressHistoryEntry is one move of an address.
type AddressHistoryEntry struct {
	// ID identifies the write the entry records (the IPInstance's UID,
	// resourceVersion and move), so a write is never recorded twice.
	// +required
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`
	// Time is when the manager wrote the IPInstance.
	// +required
	Time metav1.Time `json:"time"`
	// Move is what happened: Allocated, HandedOver, Kept or Released.
	// +required
	Move AddressMove `json:"move"`
	// Namespace of the pod and its owner.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Pod is the pod that holds the address from this entry on
	// (Allocated, HandedOver), or held it last (Kept, Released).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`
	// PodUID is the UID of the pod that holds the address; empty when no
	// pod does (Kept, Released).
	// +optional
	// +kubebuilder:validation:MaxLength=36
	PodUID string `json:"podUID,omitempty"`
	// OwnerKind and OwnerName name the workload that owns the address.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	OwnerKind string `json:"ownerKind,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	OwnerName string `json:"ownerName,omitempty"`
	// Node the pod runs on; empty when no pod holds the address.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`
	// MAC recorded with the address, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=17
	MAC string `json:"mac,omitempty"`
	// Subnet of the address.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Subnet string `json:"subnet,omitempty"`
}

// IPHistorySpec is the bounded history of one address.
type IPHistorySpec struct {
	// Address is the address, e.g. 10.10.0.7 or fd00:1::7.
	// +required
	// +kubebuilder:validation:MaxLength=45
	Address string `json:"address"`
	// Entries are the address's moves, oldest first, at most the
	// manager's --address-history-max-entries, none older than its
	// --address-history-max-age.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	Entries []AddressHistoryEntry `json:"entries,omitempty"`
}

// IPHistory records who held one address and when: every allocation,
// hand-over, keep and release of its IPInstance, written by the manager
// after the IPInstance and never read by allocation. It outlives the
// IPInstance (which is deleted when the address is freed) and is named
// after the address like its IPInstance (InstanceName).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=iph,categories=estuary
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPHistory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec IPHistorySpec `json:"spec"`
}

// IPHistoryList is a list of IPHistories.
//
// +kubebuilder:object:root=true
type IPHistoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPHistory `json:"items"`
}
