// Package remote owns the addresses of other nodes' pods as the node's
// daemon keeps them: every IPInstance bound to another node, decoded into a
// Record of its own that holds what the data path reads of it (its name,
// resource version, node, address and phase), and the informer cache that
// watches them (NewCache).
//
// A node routes to every pod of the cluster, so its daemon watches every
// record bound to a node: at 50,000 pods, 50,000 records. Decoded as
// estuaryv1.IPInstance, each costs about 650 bytes of heap however much of
// it is trimmed (the struct alone, with its ObjectMeta, binding and
// retention fields, is 560 bytes), and the records were most of the
// daemon's heap. A Record is 80 bytes and its strings. It is a Go type of
// its own, registered for the IPInstance kind in a scheme of its own, so it
// lives in a cache of its own: the daemon's main cache keeps this node's
// records whole (the address waiter and the restart recovery read their
// bindings), and this one the others', selected by the API server with a
// label selector (the node label set, and not to this node), so that a
// record enters and leaves it as it is bound and released, and never
// appears in both.
//
// A Record implements metav1.Object for the informer's keys and the
// cache's reads; the metadata it does not keep reads as empty and is never
// set. Its labels map is shared by every record of a node and is
// read-only, as every object of an informer cache is.
package remote

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Record is an IPInstance bound to another node, as the data path reads it.
type Record struct {
	meta   `json:"metadata"`
	Spec   Spec   `json:"spec"`
	Status Status `json:"status"`
}

// Spec is what a Record keeps of the record's spec: its address.
type Spec struct {
	Address Address `json:"address"`
}

// Address is the record's address, a prefix ("10.0.0.3/24").
type Address struct {
	IP string `json:"ip"`
}

// Status is what a Record keeps of the record's status: its phase.
type Status struct {
	Phase estuaryv1.IPInstancePhase `json:"phase,omitempty"`
}

// Node is the node the record is bound to (its node label).
func (r *Record) Node() string { return r.Labels[estuaryv1.LabelNode] }

// Bound reports whether the record is in phase Bound.
func (r *Record) Bound() bool { return r.Status.Phase == estuaryv1.IPInstanceBound }

// FromInstance is what a Record keeps of ipi.
func FromInstance(ipi *estuaryv1.IPInstance) *Record {
	return &Record{meta: meta{Name: ipi.Name, ResourceVersion: ipi.ResourceVersion, Labels: ipi.Labels},
		Spec: Spec{Address: Address{IP: ipi.Spec.Address.IP}}, Status: Status{Phase: ipi.Status.Phase}}
}

// GetObjectKind is empty: a Record carries no type metadata; its kind is
// its Go type's in the scheme (AddToScheme).
func (r *Record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies r; the labels map stays shared (read-only).
func (r *Record) DeepCopyObject() runtime.Object {
	c := *r
	return &c
}

// RecordList is a list of Records, as the API server lists IPInstances.
type RecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Record `json:"items"`
}

// DeepCopyObject copies l and its items.
func (l *RecordList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = append([]Record(nil), l.Items...)
	return &c
}

// AddToScheme registers Record and RecordList as estuary's IPInstance and
// IPInstanceList in s, a scheme of their own (estuaryv1's types take the
// same kinds).
func AddToScheme(s *runtime.Scheme) error {
	gv := estuaryv1.GroupVersion
	s.AddKnownTypeWithName(gv.WithKind("IPInstance"), &Record{})
	s.AddKnownTypeWithName(gv.WithKind("IPInstanceList"), &RecordList{})
	metav1.AddToGroupVersion(s, gv)
	return nil
}
