package podipam

import (
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
)

// newKubeVirt creates a kubevirt.io/v1 object of kind in ns, controlled by
// owner when given, and deletes it when the test ends.
func newKubeVirt(t *testing.T, ns, kind, name string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kubevirt.io/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{controllerRef(owner)})
	}
	if err := k8s.Create(bg(), u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), u) })
	return u
}

func controllerRef(u *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Name: u.GetName(), UID: u.GetUID(), Controller: ptr.To(true)}
}

// controlledBy makes a pod u's (a VirtualMachineInstance, an Advanced
// StatefulSet).
func controlledBy(u *unstructured.Unstructured) podOpt {
	return func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{controllerRef(u)} }
}

func deleteObject(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8s.Delete(bg(), o); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitGone(t, o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetName(), o)
}

// derivedMAC is the stable MAC of an IPv4 address: 0a:58 and its bytes.
func derivedMAC(t *testing.T, ipi estuaryv1.IPInstance) string {
	t.Helper()
	b := addrOf(t, ipi).As4()
	return net.HardwareAddr{0x0a, 0x58, b[0], b[1], b[2], b[3]}.String()
}

// waitRecordGone waits until the record of address name is deleted.
func waitRecordGone(t *testing.T, name string) {
	t.Helper()
	waitGone(t, "record "+name, &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// A VirtualMachine's pod (controlled by its VirtualMachineInstance) is the
// machine's: its address and MAC are kept for the machine when the pod and
// the instance go, without expiry, given to the pod of the machine's next
// instance on another node, and released when the machine is deleted; an
// address reserved for the machine stays reserved.
func TestVirtualMachineKeepsAddressAndMACAcrossInstances(t *testing.T) {
	overlay(t, "ov-vm", "10.86.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	vm := newKubeVirt(t, ns, workload.KindVirtualMachine, "db", nil)
	vmi := newKubeVirt(t, ns, workload.KindVirtualMachineInstance, "db", vm)
	first := newPod(t, ns, "virt-launcher-db-aaaaa", controlledBy(vmi), onNetwork("ov-vm"))
	got := waitOwned(t, ns, workload.KindVirtualMachine, "db", 1, estuaryv1.IPInstanceBound)[0]
	if got.Spec.Binding.PodName != first.Name {
		t.Fatalf("the machine's record names pod %q, want %s", got.Spec.Binding.PodName, first.Name)
	}
	mac := got.Spec.Address.MAC
	if want := derivedMAC(t, got); mac != want {
		t.Fatalf("the machine's address %s has MAC %q, want the stable %s", got.Name, mac, want)
	}
	deletePod(t, first)
	deleteObject(t, vmi)
	kept := waitOwned(t, ns, workload.KindVirtualMachine, "db", 1, estuaryv1.IPInstanceRetained)[0]
	if kept.Name != got.Name || kept.Status.ExpiresAt != nil || kept.Spec.Address.MAC != mac {
		t.Fatalf("kept record %s expiresAt %v MAC %q, want %s without expiry and MAC %s", kept.Name, kept.Status.ExpiresAt, kept.Spec.Address.MAC, got.Name, mac)
	}
	newPod(t, ns, "other", onNetwork("ov-vm")) // takes a new address, not the machine's
	vmi2 := newKubeVirt(t, ns, workload.KindVirtualMachineInstance, "db", vm)
	second := newPod(t, ns, "virt-launcher-db-bbbbb", controlledBy(vmi2), onNetwork("ov-vm"), onNode("node-b"))
	again := waitInstances(t, ns, second.Name, 1, estuaryv1.IPInstanceBound)[0]
	if again.Name != got.Name || again.Spec.Address.MAC != mac || again.Spec.Binding.NodeName != "node-b" {
		t.Fatalf("the next instance's pod got %s MAC %q on %q, want %s MAC %s on node-b", again.Name, again.Spec.Address.MAC, again.Spec.Binding.NodeName, got.Name, mac)
	}
	if other := waitInstances(t, ns, "other", 1, estuaryv1.IPInstanceBound)[0]; other.Name == got.Name {
		t.Fatalf("another pod got the machine's kept address %s", got.Name)
	}
	deletePod(t, second)
	waitOwned(t, ns, workload.KindVirtualMachine, "db", 1, estuaryv1.IPInstanceRetained)
	reserve(t, ns, "ov-vm", "10.86.0.250/24", workload.KindVirtualMachine, "db")
	waitUsed(t, "ov-vm-0", 3) // the kept address, the other pod's, the reservation held
	deleteObject(t, vm)
	waitRecordGone(t, got.Name)
	// What was reserved for the machine stays reserved.
	if resv := recordsOwnedBy(t, ns, workload.KindVirtualMachine, "db"); len(resv) != 1 || resv[0].Name != "10.86.0.250" || resv[0].Status.Phase != estuaryv1.IPInstanceReserved {
		t.Fatalf("after the machine was deleted its records are %v, want 10.86.0.250 still Reserved", addrsOf(t, resv))
	}
}

// Live migration: the target pod of the same instance starts while the
// source pod still runs. The target takes the record (one record, naming
// the target pod and its node); the older source pod never takes it back,
// and its end releases nothing.
func TestLiveMigrationMovesTheRecordToTheTarget(t *testing.T) {
	overlay(t, "ov-mig", "10.86.1.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	vm := newKubeVirt(t, ns, workload.KindVirtualMachine, "web", nil)
	vmi := newKubeVirt(t, ns, workload.KindVirtualMachineInstance, "web", vm)
	source := newPod(t, ns, "virt-launcher-web-src", controlledBy(vmi), onNetwork("ov-mig"))
	got := waitInstances(t, ns, source.Name, 1, estuaryv1.IPInstanceBound)[0]
	// Creation times have a resolution of a second: the target is newer
	// once it is created a second later.
	eventually(t, "a second past the source's creation", func() error {
		if time.Since(source.CreationTimestamp.Time) < time.Second {
			return fmt.Errorf("created %s", source.CreationTimestamp)
		}
		return nil
	})
	target := newPod(t, ns, "virt-launcher-web-dst", controlledBy(vmi), onNetwork("ov-mig"), onNode("node-b"))
	moved := waitInstances(t, ns, target.Name, 1, estuaryv1.IPInstanceBound)[0]
	if moved.Name != got.Name || moved.Spec.Binding.PodUID != string(target.UID) || moved.Spec.Binding.NodeName != "node-b" ||
		moved.Spec.Address.MAC != got.Spec.Address.MAC {
		t.Fatalf("after the target started the record is %s bound to %s on %q MAC %q; want %s bound to the target on node-b, MAC %s",
			moved.Name, moved.Spec.Binding.PodName, moved.Spec.Binding.NodeName, moved.Spec.Address.MAC, got.Name, got.Spec.Address.MAC)
	}
	if n := len(allInstances(t, ns)); n != 1 {
		t.Fatalf("%d records for one machine", n)
	}
	// The source, looked at again while it runs, gets nothing back.
	source = podRef(ns, source.Name)
	if err := k8s.Get(bg(), client.ObjectKeyFromObject(source), source); err != nil {
		t.Fatal(err)
	}
	source.Labels = map[string]string{"touched": "yes"}
	if err := k8s.Update(bg(), source); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, source.Name, ReasonAddressMoved)
	if n := len(instancesOf(t, ns, source.Name)); n != 0 {
		t.Fatalf("the source pod holds %d records again", n)
	}
	// The source ends (KubeVirt's source virt-launcher exits): the target
	// keeps the address.
	source.Status.Phase = corev1.PodSucceeded
	if err := k8s.Status().Update(bg(), source); err != nil {
		t.Fatal(err)
	}
	deletePod(t, source)
	newPod(t, ns, "later", onNetwork("ov-mig"))
	waitInstances(t, ns, "later", 1, estuaryv1.IPInstanceBound)
	after := waitInstances(t, ns, target.Name, 1, estuaryv1.IPInstanceBound)[0]
	if after.Name != got.Name || after.Spec.Binding.PodUID != string(target.UID) {
		t.Fatalf("after the source ended the record is %s bound to %s", after.Name, after.Spec.Binding.PodName)
	}
}

// A VirtualMachineInstance no VirtualMachine controls is its own workload:
// its next pod gets the address back, and deleting the instance releases it.
func TestInstanceWithoutMachineReleasedWithIt(t *testing.T) {
	overlay(t, "ov-vmi", "10.86.2.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	vmi := newKubeVirt(t, ns, workload.KindVirtualMachineInstance, "solo", nil)
	first := newPod(t, ns, "virt-launcher-solo-a", controlledBy(vmi), onNetwork("ov-vmi"))
	got := waitOwned(t, ns, workload.KindVirtualMachineInstance, "solo", 1, estuaryv1.IPInstanceBound)[0]
	deletePod(t, first)
	waitOwned(t, ns, workload.KindVirtualMachineInstance, "solo", 1, estuaryv1.IPInstanceRetained)
	second := newPod(t, ns, "virt-launcher-solo-b", controlledBy(vmi), onNetwork("ov-vmi"))
	if again := waitInstances(t, ns, second.Name, 1, estuaryv1.IPInstanceBound)[0]; again.Name != got.Name || again.Spec.Address.MAC != got.Spec.Address.MAC {
		t.Fatalf("the instance's next pod got %s MAC %q, want %s MAC %s", again.Name, again.Spec.Address.MAC, got.Name, got.Spec.Address.MAC)
	}
	deletePod(t, second)
	waitOwned(t, ns, workload.KindVirtualMachineInstance, "solo", 1, estuaryv1.IPInstanceRetained)
	deleteObject(t, vmi)
	waitRecordGone(t, got.Name)
}

// waitEvent waits for an event of reason about pod ns/name.
func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	eventually(t, reason+" event on "+name, func() error { return hasEvent(ns, name, reason) })
}
