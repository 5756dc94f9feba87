package cli

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/controller/podipam"
	"github.com/estuary-cni/estuary/pkg/ipam"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// startPodIPAM runs the manager's pod address controller against the test
// API server until the test ends, and waits until it has rebuilt its
// allocator from the records.
func startPodIPAM(t *testing.T) {
	t.Helper()
	var r *podipam.Reconciler
	testenv.StartManager(t, cfg, k8s.Scheme(), func(mgr manager.Manager) error {
		var err error
		r, err = podipam.Setup(mgr, ipam.New(), podipam.Options{Metrics: podipam.NewMetrics(prometheus.NewRegistry()),
			RetryExhausted: 500 * time.Millisecond, StatusInterval: 200 * time.Millisecond})
		return err
	})
	testenv.Eventually(t, "allocator rebuilt", 30*time.Second, func() error { return r.Ready() })
}

// record reads the record of address a.
func record(a string) (*estuaryv1.IPInstance, error) {
	ipi := &estuaryv1.IPInstance{}
	err := k8s.Get(bg(), client.ObjectKey{Name: estuaryv1.InstanceName(netip.MustParseAddr(a))}, ipi)
	return ipi, err
}

// boundTo checks that the record of a is Bound to pod p, with mac.
func boundTo(a string, p *corev1.Pod, mac string) func() error {
	return func() error {
		ipi, err := record(a)
		if err != nil {
			return err
		}
		b := ipi.Spec.Binding
		if ipi.Status.Phase != estuaryv1.IPInstanceBound || b.PodName != p.Name || b.PodUID != string(p.UID) {
			return fmt.Errorf("%s is %s for pod %s (uid %s)", a, ipi.Status.Phase, b.PodName, b.PodUID)
		}
		if ipi.Spec.Address.MAC != mac {
			return fmt.Errorf("%s has MAC %q, want %q", a, ipi.Spec.Address.MAC, mac)
		}
		return nil
	}
}

func inPhase(a string, phase estuaryv1.IPInstancePhase) func() error {
	return func() error {
		ipi, err := record(a)
		if err != nil {
			return err
		}
		if ipi.Status.Phase != phase {
			return fmt.Errorf("%s is %s, want %s", a, ipi.Status.Phase, phase)
		}
		return nil
	}
}

// The records a migration writes are the manager's from then on: pods
// re-created during the switch, a StatefulSet's by name and a
// Deployment's by workload, get their hybridnet addresses back, each with
// the MAC hybridnet gave it.
func TestMigratedAddressesComeBackToRecreatedPods(t *testing.T) {
	hnCRDs(t)
	ns := namespace(t)
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"mig": "vlan"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"mig": "vlan"}}})
	db0, api, sts := migrateWorkloads(t, ns)
	hnObjects(t, hnFixture(ns, db0, api, sts))
	cleanupMigrated(t, ns)
	if out, err := run(t, "", "migrate", "hybridnet", "--secret-namespace", ns); !strings.Contains(out, "12 created") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	startPodIPAM(t)
	const dbMAC, apiMAC = "ee:ee:0a:bb:01:0a", "ee:ee:0a:bb:00:14"
	eventually := func(what string, check func() error) { testenv.Eventually(t, what, 30*time.Second, check) }
	eventually("db-0 keeps its address", boundTo("10.187.1.10", db0, dbMAC))
	eventually("the api pod keeps its IPv4 address", boundTo("10.187.0.20", api, apiMAC))
	eventually("the api pod keeps its IPv6 address", boundTo("fd00:187::20", api, apiMAC))

	// The switch reaches db-0's node: the pod is deleted and re-created
	// (by its StatefulSet) on a node that runs estuary.
	deleteNow(t, db0)
	eventually("db-0's address kept for its ordinal", inPhase("10.187.1.10", estuaryv1.IPInstanceRetained))
	setRef := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: sts.UID, Controller: ptr.To(true)}
	db0again := scheduledPod(t, ns, "db-0", setRef, "n2")
	eventually("the new db-0 gets 10.187.1.10 back", boundTo("10.187.1.10", db0again, dbMAC))
	db1 := scheduledPod(t, ns, "db-1", setRef, "n2")
	eventually("db-1, away during the migration, gets 10.187.1.11", boundTo("10.187.1.11", db1, "ee:ee:0a:bb:01:0b"))

	// The api pod goes; the next pod of its Deployment takes both
	// addresses.
	deleteNow(t, api)
	eventually("the api pod's addresses kept for the Deployment", inPhase("10.187.0.20", estuaryv1.IPInstanceRetained))
	rsRef := api.OwnerReferences[0]
	next := scheduledPod(t, ns, "api-5f-y2", &rsRef, "n2")
	eventually("the Deployment's next pod gets 10.187.0.20", boundTo("10.187.0.20", next, apiMAC))
	eventually("the Deployment's next pod gets fd00:187::20", boundTo("fd00:187::20", next, apiMAC))
}

// deleteNow deletes a pod at once (no kubelet runs here) and waits until it
// is gone.
func deleteNow(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if err := k8s.Delete(bg(), p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pod "+p.Name+" gone", 30*time.Second, func() error {
		if err := k8s.Get(bg(), client.ObjectKeyFromObject(p), &corev1.Pod{}); err == nil {
			return errors.New("still there")
		}
		return nil
	})
}

// scheduledPod creates a pod of owner, bound to node.
func scheduledPod(t *testing.T, ns, name string, owner *metav1.OwnerReference, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	create(t, p)
	return p
}
