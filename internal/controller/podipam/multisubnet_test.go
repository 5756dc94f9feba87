package podipam

import (
	"net/netip"
	"testing"

	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func subnetSpec(network string, version int32, cidr string) estuaryv1.SubnetSpec {
	return estuaryv1.SubnetSpec{Network: network, Range: estuaryv1.AddressRange{Version: version, CIDR: cidr}}
}

// podSubnet creates a pod and waits for its one address; it returns the
// record.
func podSubnet(t *testing.T, ns, name string, opts ...podOpt) estuaryv1.IPInstance {
	t.Helper()
	return waitInstances(t, ns, newPod(t, ns, name, opts...).Name, 1, estuaryv1.IPInstanceBound)[0]
}

// A pod that names two IPv4 subnets gets its address from the first while
// that one has room, from the second once the first is full, waits when
// both are full, and takes the first again once an address there is freed.
func TestPodNamedSubnetsTriedInOrder(t *testing.T) {
	newNetwork(t, "ov-multi", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](7)},
		map[string]estuaryv1.SubnetSpec{
			"ov-multi-a": subnetSpec("ov-multi", 4, "10.80.0.0/30"), // two usable addresses each
			"ov-multi-b": subnetSpec("ov-multi", 4, "10.80.1.0/30"),
		})
	startManager(t)
	ns := newNamespace(t, nil)
	aThenB := annotated(estuaryv1.AnnotationSubnet, "ov-multi-a,ov-multi-b")
	want := func(ipi estuaryv1.IPInstance, subnet, prefix string) {
		t.Helper()
		if ipi.Spec.Subnet != subnet || ipi.Spec.Network != "ov-multi" {
			t.Fatalf("pod %s got %s from subnet %s of network %s; want subnet %s of ov-multi",
				ipi.Spec.Binding.PodName, ipi.Spec.Address.IP, ipi.Spec.Subnet, ipi.Spec.Network, subnet)
		}
		if got := addrOf(t, ipi); !netip.MustParsePrefix(prefix).Contains(got) {
			t.Fatalf("pod %s got %s, outside %s", ipi.Spec.Binding.PodName, got, prefix)
		}
	}

	first := newPod(t, ns, "first", aThenB)
	firstIPI := waitInstances(t, ns, first.Name, 1, estuaryv1.IPInstanceBound)[0]
	want(firstIPI, "ov-multi-a", "10.80.0.0/30")
	// The order written decides, not the names' order: b first, though a has room.
	want(podSubnet(t, ns, "reversed", annotated(estuaryv1.AnnotationSubnet, "ov-multi-b,ov-multi-a")), "ov-multi-b", "10.80.1.0/30")
	want(podSubnet(t, ns, "second", aThenB), "ov-multi-a", "10.80.0.0/30")
	waitUsed(t, "ov-multi-a", 2)

	// a is full: the next pod gets b's last address.
	want(podSubnet(t, ns, "third", aThenB), "ov-multi-b", "10.80.1.0/30")
	waitUsed(t, "ov-multi-b", 2)

	// Both are full: the pod waits, and the event names both subnets.
	newPod(t, ns, "fourth", aThenB)
	eventually(t, "an AllocationFailed event naming both subnets", func() error {
		return eventNote(ns, "fourth", ReasonAllocationFailed, `no requested IPv4 subnet has a free address (tried "ov-multi-a", "ov-multi-b")`)
	})
	if n := len(instancesOf(t, ns, "fourth")); n != 0 {
		t.Fatalf("a pod got %d addresses while both its subnets were full", n)
	}

	// An address of a is freed: the waiting pod takes it, not one of b.
	deletePod(t, first)
	got := waitInstances(t, ns, "fourth", 1, estuaryv1.IPInstanceBound)[0]
	want(got, "ov-multi-a", "10.80.0.0/30")
	if addrOf(t, got) != addrOf(t, firstIPI) {
		t.Errorf("pod fourth got %s, want %s, the address freed in ov-multi-a", addrOf(t, got), addrOf(t, firstIPI))
	}
	waitUsed(t, "ov-multi-a", 2)
	waitUsed(t, "ov-multi-b", 2)
}

// Subnets of both families named in one list, interleaved: each family
// takes its own subnets in the order written, in one dual-stack allocation.
func TestPodNamedSubnetsPerFamily(t *testing.T) {
	newNetwork(t, "ov-multi-ds", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](7)},
		map[string]estuaryv1.SubnetSpec{
			"ov-multi-ds-a": subnetSpec("ov-multi-ds", 4, "10.80.2.0/24"),
			"ov-multi-ds-b": subnetSpec("ov-multi-ds", 4, "10.80.3.0/24"),
			"ov-multi-ds-6": subnetSpec("ov-multi-ds", 6, "fd00:80::/64"),
		})
	startManager(t)
	ns := newNamespace(t, nil)
	p := newPod(t, ns, "dual", annotated(estuaryv1.AnnotationSubnet, "ov-multi-ds-b,ov-multi-ds-6,ov-multi-ds-a"))
	got := map[int32]string{}
	for _, ipi := range waitInstances(t, ns, p.Name, 2, estuaryv1.IPInstanceBound) {
		got[ipi.Spec.Address.Version] = ipi.Spec.Subnet
	}
	if got[4] != "ov-multi-ds-b" || got[6] != "ov-multi-ds-6" {
		t.Errorf("subnets by IP version %v; want IPv4 from ov-multi-ds-b (named first) and IPv6 from ov-multi-ds-6", got)
	}
}
