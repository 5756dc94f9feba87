//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestVirtualMachineKeepsAddressAndMAC: KubeVirt's CRDs (trimmed, no
// KubeVirt runtime) installed by the test, a VirtualMachine and its
// VirtualMachineInstance created, and a pod controlled by the instance
// standing for its virt-launcher. The pod gets an address and the stable
// MAC recorded with it, which its interface carries (ip link in the pod).
// The pod and the instance are deleted, a new instance and its pod created
// on another node: the pod runs with the same address and the same MAC.
// Deleting the VirtualMachine releases the address.
func TestVirtualMachineKeepsAddressAndMAC(t *testing.T) {
	e := needLab(t)
	e.installKubeVirtCRDs(t)
	ns := e.newNamespace(t, "vm")
	vm := e.createKubeVirt(t, ns, "VirtualMachine", "db", nil)

	vmi := e.createKubeVirt(t, ns, "VirtualMachineInstance", "db", vm)
	first := e.launcher(t, ns, "virt-launcher-db-aaaaa", vmi, "")
	addr, mac := first.Status.PodIP, e.podMAC(t, ns, first.Name)
	rec := e.record(t, addr)
	if rec.Spec.Binding.Owner.Kind != "VirtualMachine" || rec.Spec.Binding.Owner.Name != "db" || rec.Spec.Address.MAC != mac {
		t.Fatalf("record %s: owner %+v MAC %q; want VirtualMachine db and the pod's MAC %s", rec.Name, rec.Spec.Binding.Owner, rec.Spec.Address.MAC, mac)
	}
	if b := netip.MustParseAddr(addr).As4(); mac != (net.HardwareAddr{0x0a, 0x58, b[0], b[1], b[2], b[3]}).String() {
		t.Errorf("the machine's pod has MAC %s, want the stable MAC of %s", mac, addr)
	}
	t.Logf("first instance: pod %s on %s, %s, MAC %s", first.Name, first.Spec.NodeName, addr, mac)

	e.removeAndWait(t, &first)
	e.removeAndWait(t, vmi)
	e.waitPhase(t, addr, estuaryv1.IPInstanceRetained)

	vmi = e.createKubeVirt(t, ns, "VirtualMachineInstance", "db", vm)
	other := e.nodes[0]
	if other == first.Spec.NodeName {
		other = e.nodes[1]
	}
	second := e.launcher(t, ns, "virt-launcher-db-bbbbb", vmi, other)
	if got := e.podMAC(t, ns, second.Name); second.Status.PodIP != addr || got != mac {
		t.Fatalf("the next instance's pod runs on %s with %s MAC %s; want %s MAC %s", second.Spec.NodeName, second.Status.PodIP, got, addr, mac)
	}
	t.Logf("next instance: pod %s on %s, %s, MAC %s", second.Name, second.Spec.NodeName, addr, mac)

	e.removeAndWait(t, &second)
	e.removeAndWait(t, vmi)
	e.waitPhase(t, addr, estuaryv1.IPInstanceRetained)
	e.removeAndWait(t, vm)
	eventually(t, "the machine's address released", time.Minute, func(ctx context.Context) error {
		err := e.c.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(netip.MustParseAddr(addr))}, &estuaryv1.IPInstance{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("record %s still there", addr)
	})
}

// installKubeVirtCRDs installs the trimmed KubeVirt CRDs of package
// workload's testdata, removed when the test ends.
func (e *labEnv) installKubeVirtCRDs(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.repo, "internal", "workload", "testdata", "crds", "kubevirt.io_*.yaml"))
	if err != nil || len(files) != 2 {
		t.Fatalf("KubeVirt's CRDs: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		crd := readOne(t, f)
		if err := e.c.Create(testCtx(t, time.Minute), crd); err != nil {
			t.Fatalf("create CRD %s: %v", crd.GetName(), err)
		}
		t.Cleanup(func() {
			if err := e.c.Delete(context.Background(), crd); err != nil {
				t.Errorf("delete CRD %s: %v", crd.GetName(), err)
			}
		})
	}
	eventually(t, "KubeVirt's kinds served", time.Minute, func(ctx context.Context) error {
		var l unstructured.UnstructuredList
		l.SetAPIVersion("kubevirt.io/v1")
		l.SetKind("VirtualMachineInstanceList")
		return e.c.List(ctx, &l)
	})
}

// createKubeVirt creates a kubevirt.io/v1 object of kind, controlled by
// owner when given.
func (e *labEnv) createKubeVirt(t *testing.T, ns, kind, name string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kubevirt.io/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(),
			Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}})
	}
	if err := e.c.Create(testCtx(t, time.Minute), u); err != nil {
		t.Fatalf("create %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// launcher runs a netexec pod controlled by vmi (on node, "" lets the
// scheduler pick) and returns it once ready.
func (e *labEnv) launcher(t *testing.T, ns, name string, vmi *unstructured.Unstructured, node string) corev1.Pod {
	t.Helper()
	p := netexecPod(name, node, map[string]string{"kubevirt.io": "virt-launcher", "vm": vmi.GetName()})
	p.Namespace = ns
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance",
		Name: vmi.GetName(), UID: vmi.GetUID(), Controller: ptr.To(true)}}
	if err := e.c.Create(testCtx(t, time.Minute), p); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return e.waitPods(t, ns, name)[name]
}

var etherRE = regexp.MustCompile(`link/ether ([0-9a-f:]{17})`)

// podMAC is the MAC of eth0 in the pod, as ip link shows it.
func (e *labEnv) podMAC(t *testing.T, ns, pod string) string {
	t.Helper()
	out, err := e.podExec(testCtx(t, time.Minute), ns, pod, "ip", "link", "show", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	m := etherRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ip link show eth0 in %s/%s: no MAC in %q", ns, pod, out)
	}
	return m[1]
}

// record reads the IPInstance of addr.
func (e *labEnv) record(t *testing.T, addr string) estuaryv1.IPInstance {
	t.Helper()
	var ipi estuaryv1.IPInstance
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: estuaryv1.InstanceName(netip.MustParseAddr(addr))}, &ipi); err != nil {
		t.Fatalf("get the record of %s: %v", addr, err)
	}
	return ipi
}

// waitPhase waits until the record of addr is in phase.
func (e *labEnv) waitPhase(t *testing.T, addr string, phase estuaryv1.IPInstancePhase) {
	t.Helper()
	eventually(t, fmt.Sprintf("record %s %s", addr, phase), 2*time.Minute, func(ctx context.Context) error {
		var ipi estuaryv1.IPInstance
		if err := e.c.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(netip.MustParseAddr(addr))}, &ipi); err != nil {
			return err
		}
		if ipi.Status.Phase != phase {
			return fmt.Errorf("%s", ipi.Status.Phase)
		}
		return nil
	})
}

// removeAndWait deletes obj and waits until it is gone, failing the test
// when it is not.
func (e *labEnv) removeAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.c.Delete(testCtx(t, time.Minute), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete %s: %v", obj.GetName(), err)
	}
	eventually(t, obj.GetName()+" deleted", 2*time.Minute, func(ctx context.Context) error {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there")
	})
}
