package nodelabel

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestOnlyLabelInputsRelabelNodes: a Subnet's counts moving while it still
// has room, or a Network's status, let no update through; the Subnet
// running full (or getting room again), a Network's domain or type, and a
// deletion do.
func TestOnlyLabelInputsRelabelNodes(t *testing.T) {
	subnet := func(available string, mod func(*estuaryv1.Subnet)) *estuaryv1.Subnet {
		s := &estuaryv1.Subnet{
			ObjectMeta: metav1.ObjectMeta{Name: "s"},
			Spec:       estuaryv1.SubnetSpec{Network: "n", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.0.0.0/24"}},
			Status:     estuaryv1.SubnetStatus{Available: available, Used: 1},
		}
		if mod != nil {
			mod(s)
		}
		return s
	}
	network := func(mod func(*estuaryv1.Network)) *estuaryv1.Network {
		n := &estuaryv1.Network{
			ObjectMeta: metav1.ObjectMeta{Name: "n"},
			Spec:       estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, NodeSelector: map[string]string{"rack": "a", "zone": "z"}},
		}
		if mod != nil {
			mod(n)
		}
		return n
	}
	now := metav1.Now()
	cases := []struct {
		name     string
		old, new any
		want     bool
	}{
		{"subnet counts move, room left", subnet("250", nil), subnet("249", func(s *estuaryv1.Subnet) { s.Status.Used = 2 }), false},
		{"subnet counted for the first time, room", subnet("", nil), subnet("254", nil), false},
		{"subnet runs full", subnet("1", nil), subnet("0", nil), true},
		{"full subnet gets room", subnet("0", nil), subnet("1", nil), true},
		{"subnet turns private", subnet("5", nil), subnet("5", func(s *estuaryv1.Subnet) { s.Spec.Private = true }), true},
		{"subnet being deleted", subnet("5", nil), subnet("5", func(s *estuaryv1.Subnet) { s.DeletionTimestamp = &now }), true},
		{"network status only", network(nil), network(func(n *estuaryv1.Network) { n.Status.Subnets = []string{"s"} }), false},
		{"network domain moves", network(nil), network(func(n *estuaryv1.Network) { n.Spec.NodeSelector = map[string]string{"rack": "b", "zone": "z"} }), true},
		{"network being deleted", network(nil), network(func(n *estuaryv1.Network) { n.DeletionTimestamp = &now }), true},
	}
	for _, c := range cases {
		e := event.UpdateEvent{}
		switch o := c.old.(type) {
		case *estuaryv1.Subnet:
			e.ObjectOld, e.ObjectNew = o, c.new.(*estuaryv1.Subnet)
		case *estuaryv1.Network:
			e.ObjectOld, e.ObjectNew = o, c.new.(*estuaryv1.Network)
		}
		if got := inputsChanged.Update(e); got != c.want {
			t.Errorf("%s: update let through %t, want %t", c.name, got, c.want)
		}
	}
	if !inputsChanged.Create(event.CreateEvent{Object: subnet("5", nil)}) || !inputsChanged.Delete(event.DeleteEvent{Object: network(nil)}) {
		t.Error("a create or delete was held back")
	}
}
