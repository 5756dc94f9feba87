// Package migrate translates hybridnet's networking.alibaba.com/v1
// Networks, Subnets and IPInstances into estuary's Networks, Subnets,
// IPInstances and the Secrets holding BGP passwords, for
// `kubectl estuary migrate hybridnet`. It is pure: the caller reads the
// hybridnet objects (from the cluster or from files), what is known of the
// pods and StatefulSets they name, and the estuary objects that exist
// already, and writes what Translate returns.
//
// What estuary cannot express is never dropped silently: every object left
// out, and every field of a migrated object that has no estuary meaning
// (or one this package does not know), is listed in the Report with why.
// An object estuary's admission webhook would refuse is left out with the
// webhook's own reason, so that a dry run shows everything a real run
// would meet.
//
// Addresses: every hybridnet IPInstance held for a workload becomes an
// estuary record that keeps it for that workload (addresses.go), so that
// pods re-created during the switch, node by node, get their addresses
// back.
package migrate

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
)

// LabelMigratedFrom marks every object a migration writes, with the value
// "hybridnet".
const LabelMigratedFrom = "networking.estuary.io/migrated-from"

// Pod is what is known of a pod a hybridnet IPInstance names.
type Pod struct {
	UID  string
	Node string
	// Finished: the pod Succeeded or Failed and will not run again.
	Finished bool
	// Owner is the pod's top-level owner (workload.Of).
	Owner workload.Ref
}

// Set is what is known of a StatefulSet.
type Set struct {
	UID      string
	Replicas int32
}

// Input is what Translate reads.
type Input struct {
	// Networks, Subnets and IPInstances are hybridnet's objects.
	Networks, Subnets, IPInstances []*unstructured.Unstructured
	// Pods are the pods of the IPInstances' namespaces, by
	// namespace/name; nil when the pods are not known (files without
	// them), which leaves out the addresses of every pod but a
	// StatefulSet's.
	Pods map[string]Pod
	// Sets are the StatefulSets, by namespace/name; nil when not known.
	Sets map[string]Set
	// Existing estuary Networks and Subnets, and the Nodes, that the
	// admission webhook's rules check the new objects against.
	Existing Existing
	// SecretNamespace is where the Secrets of BGP passwords are written.
	SecretNamespace string
	// RetainTTL is how long the address of a pod of any workload but a
	// StatefulSet is kept for the workload once the pod goes.
	RetainTTL time.Duration
}

// Existing are estuary's objects in the cluster.
type Existing struct {
	Networks []estuaryv1.Network
	Subnets  []estuaryv1.Subnet
	Nodes    []corev1.Node
}

// Result is what a migration writes, in the order it must be written, and
// its report.
type Result struct {
	Secrets     []*corev1.Secret
	Networks    []*estuaryv1.Network
	Subnets     []*estuaryv1.Subnet
	IPInstances []*estuaryv1.IPInstance
	Report      Report
}

// translator carries one translation's state.
type translator struct {
	in  Input
	out Result
	// networks and subnets are the migrated ones by name.
	networks map[string]*estuaryv1.Network
	subnets  map[string]*estuaryv1.Subnet
}

// Translate turns in's hybridnet objects into estuary's.
func Translate(in Input) Result {
	t := &translator{in: in, networks: map[string]*estuaryv1.Network{}, subnets: map[string]*estuaryv1.Subnet{}}
	for _, u := range sorted(in.Networks) {
		t.network(u)
	}
	for _, u := range sorted(in.Subnets) {
		t.subnet(u)
	}
	t.addresses(sorted(in.IPInstances))
	slices.SortFunc(t.out.Secrets, func(a, b *corev1.Secret) int { return cmp.Compare(a.Name, b.Name) })
	t.out.Report.sort()
	return t.out
}

// sorted orders objects by namespace and name, so that a translation does
// not depend on the order it was given them in.
func sorted(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(objs)
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out
}

// objectMeta is the metadata of a migrated object named name.
func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelMigratedFrom: "hybridnet"}}
}
