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
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestCachesSplitTheRecordsByNode syncs the daemon's two caches over a
// real API server: the main cache (cacheOptions) holds this node's record
// whole, the records cache (remote.NewCache) another node's as a Record,
// and neither a reservation (a record on no node); a reservation bound to
// another node enters the records cache, a record released from its node
// leaves it, and one bound to this node moves to the main cache.
func TestCachesSplitTheRecordsByNode(t *testing.T) {
	kube, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	local := record(ctx, t, k8s, "10.0.0.2/24", "node-a")
	remoteRec := record(ctx, t, k8s, "10.0.0.3/24", "node-b")
	reserved := record(ctx, t, k8s, "10.0.0.4/24", "")
	moving := record(ctx, t, k8s, "10.0.0.5/24", "node-b")

	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cacheOptions("node-a", scheme)
	if err != nil {
		t.Fatal(err)
	}
	main, err := cache.New(kube, opts)
	if err != nil {
		t.Fatal(err)
	}
	records, err := remote.NewCache(kube, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := main.GetInformer(ctx, &estuaryv1.IPInstance{}); err != nil {
		t.Fatal(err)
	}
	if _, err := records.GetInformer(ctx, &remote.Record{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = main.Start(ctx) }()
	go func() { _ = records.Start(ctx) }()
	if !main.WaitForCacheSync(ctx) || !records.WaitForCacheSync(ctx) {
		t.Fatal("caches not synced")
	}
	holds := func(c cache.Cache, list client.ObjectList, want ...string) func() error {
		return func() error {
			if err := c.List(ctx, list); err != nil {
				return err
			}
			var names []string
			switch l := list.(type) {
			case *estuaryv1.IPInstanceList:
				for _, r := range l.Items {
					names = append(names, r.Name)
				}
			case *remote.RecordList:
				for _, r := range l.Items {
					names = append(names, r.Name)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, want) {
				return fmt.Errorf("%T holds %v, want %v", list, names, want)
			}
			return nil
		}
	}
	testenv.Eventually(t, "this node's record in the main cache", 10*time.Second,
		holds(main, &estuaryv1.IPInstanceList{}, local.Name))
	testenv.Eventually(t, "other nodes' records in the records cache", 10*time.Second,
		holds(records, &remote.RecordList{}, remoteRec.Name, moving.Name))
	var whole estuaryv1.IPInstance
	if err := main.Get(ctx, client.ObjectKey{Name: local.Name}, &whole); err != nil || whole.Spec.Binding.Owner.Name != "db" {
		t.Errorf("this node's record = %+v, %v; want it whole", whole.Spec.Binding, err)
	}
	var r remote.Record
	if err := records.Get(ctx, client.ObjectKey{Name: remoteRec.Name}, &r); err != nil || r.Node() != "node-b" ||
		!r.Bound() || r.Spec.Address.IP != "10.0.0.3/24" || r.GetResourceVersion() == "" {
		t.Errorf("another node's record = %+v, %v; want node-b, Bound, 10.0.0.3/24 and a version", r, err)
	}

	bind(ctx, t, k8s, reserved, "node-b")
	testenv.Eventually(t, "a reservation bound to another node cached", 10*time.Second,
		holds(records, &remote.RecordList{}, remoteRec.Name, reserved.Name, moving.Name))
	bind(ctx, t, k8s, remoteRec, "")
	testenv.Eventually(t, "a record released from its node dropped", 10*time.Second,
		holds(records, &remote.RecordList{}, reserved.Name, moving.Name))
	bind(ctx, t, k8s, moving, "node-a")
	testenv.Eventually(t, "a record bound to this node leaves the records cache", 10*time.Second,
		holds(records, &remote.RecordList{}, reserved.Name))
	testenv.Eventually(t, "a record bound to this node enters the main cache", 10*time.Second,
		holds(main, &estuaryv1.IPInstanceList{}, local.Name, moving.Name))
}

// record creates the record of ip, bound to node (labelled with it) or, when
// node is empty, reserved.
func record(ctx context.Context, t *testing.T, k8s client.Client, ip, node string) *estuaryv1.IPInstance {
	t.Helper()
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

// bind writes ipi bound to node, or released from its node when node is
// empty (Retained, as a fixed IP whose pod is gone).
func bind(ctx context.Context, t *testing.T, k8s client.Client, ipi *estuaryv1.IPInstance, node string) {
	t.Helper()
	ipi.Spec.Binding.NodeName, ipi.Spec.Reserved = node, false
	ipi.Spec.Binding.PodName = "db-" + ipi.Name
	ipi.Status.Phase = estuaryv1.IPInstanceRetained
	delete(ipi.Labels, estuaryv1.LabelNode)
	if node != "" {
		ipi.Labels[estuaryv1.LabelNode], ipi.Status.Phase = node, estuaryv1.IPInstanceBound
	}
	if err := k8s.Update(ctx, ipi); err != nil {
		t.Fatal(err)
	}
}
