package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/testenv"
)

// TestCacheHoldsTheRecordsBoundToANode syncs the daemon's cache
// (cacheOptions) over a real API server: it holds this node's record whole
// and another node's trimmed, and no reservation (a record on no node); a
// reservation bound to a node enters it, and a record released from its
// node leaves it.
func TestCacheHoldsTheRecordsBoundToANode(t *testing.T) {
	kube, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	record := func(ip, node string) *estuaryv1.IPInstance {
		a := netip.MustParsePrefix(ip)
		ipi := &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(a.Addr()),
			Labels: map[string]string{estuaryv1.LabelSubnet: "overlay-v4"}},
			Spec: estuaryv1.IPInstanceSpec{Network: "overlay", Subnet: "overlay-v4", Reserved: node == "",
				Address: estuaryv1.InstanceAddress{IP: ip, Version: 4},
				Binding: estuaryv1.Binding{Namespace: "default", NodeName: node,
					Owner: estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db"}}},
			Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceReserved}}
		if node != "" {
			ipi.Labels[estuaryv1.LabelNode] = node
			ipi.Spec.Binding.PodName, ipi.Status.Phase = "db-"+ipi.Name, estuaryv1.IPInstanceBound
		}
		if err := k8s.Create(ctx, ipi); err != nil {
			t.Fatal(err)
		}
		return ipi
	}
	record("10.0.0.2/24", "node-a")
	remote := record("10.0.0.3/24", "node-b")
	reserved := record("10.0.0.4/24", "")

	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(kube, cacheOptions("node-a", scheme))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &estuaryv1.IPInstance{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache not synced")
	}
	cached := func(want ...string) func() error {
		return func() error {
			var list estuaryv1.IPInstanceList
			if err := c.List(ctx, &list); err != nil {
				return err
			}
			var names []string
			for _, r := range list.Items {
				names = append(names, r.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, want) {
				return fmt.Errorf("cached records %v, want %v", names, want)
			}
			return nil
		}
	}
	testenv.Eventually(t, "the records on a node cached", 10*time.Second, cached("10.0.0.2", "10.0.0.3"))
	var got estuaryv1.IPInstance
	if err := c.Get(ctx, client.ObjectKey{Name: "10.0.0.2"}, &got); err != nil || got.Spec.Binding.Owner.Name != "db" {
		t.Errorf("this node's record = %+v, %v; want it whole", got.Spec.Binding, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "10.0.0.3"}, &got); err != nil || got.Spec.Binding.Owner.Name != "" ||
		got.Labels[estuaryv1.LabelNode] != "node-b" || got.Spec.Address.IP != "10.0.0.3/24" {
		t.Errorf("another node's record = %+v, %v; want its node label and address alone", got, err)
	}

	reserved.Labels[estuaryv1.LabelNode] = "node-b"
	reserved.Spec.Binding.NodeName, reserved.Spec.Binding.PodName, reserved.Spec.Reserved = "node-b", "db-0", false
	reserved.Status.Phase = estuaryv1.IPInstanceBound
	if err := k8s.Update(ctx, reserved); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a reservation bound to a node cached", 10*time.Second, cached("10.0.0.2", "10.0.0.3", "10.0.0.4"))
	delete(remote.Labels, estuaryv1.LabelNode)
	remote.Spec.Binding.NodeName = ""
	if err := k8s.Update(ctx, remote); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a record released from its node dropped", 10*time.Second, cached("10.0.0.2", "10.0.0.4"))
}
