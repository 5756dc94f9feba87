package podipam

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// fakeStore is a recordStore in memory for the ledger's conditional writes,
// which are pure logic over what a read returns; the envtest suites prove
// them against the API server through clientStore.
type fakeStore struct {
	cached, live map[string]*estuaryv1.IPInstance
	updates      []*estuaryv1.IPInstance
}

var ipinstances = schema.GroupResource{Group: "estuary.io", Resource: "ipinstances"}

func (s *fakeStore) read(m map[string]*estuaryv1.IPInstance, name string) (*estuaryv1.IPInstance, error) {
	if ipi, ok := m[name]; ok {
		return ipi.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(ipinstances, name)
}

func (s *fakeStore) Get(_ context.Context, name string) (*estuaryv1.IPInstance, error) {
	return s.read(s.cached, name)
}

func (s *fakeStore) GetLive(_ context.Context, name string) (*estuaryv1.IPInstance, error) {
	return s.read(s.live, name)
}

func (s *fakeStore) HeldBy(context.Context, string) ([]estuaryv1.IPInstance, error) { return nil, nil }

func (s *fakeStore) Create(context.Context, *estuaryv1.IPInstance) error {
	return errors.New("fakeStore: create is not part of these tests")
}

func (s *fakeStore) Update(_ context.Context, ipi *estuaryv1.IPInstance) error {
	if cur := s.live[ipi.Name]; cur == nil || cur.ResourceVersion != ipi.ResourceVersion {
		return apierrors.NewConflict(ipinstances, ipi.Name, errors.New("stale resourceVersion"))
	}
	s.updates = append(s.updates, ipi.DeepCopy())
	s.live[ipi.Name] = ipi.DeepCopy()
	return nil
}

func (s *fakeStore) Delete(context.Context, *estuaryv1.IPInstance) error {
	return errors.New("fakeStore: delete is not part of these tests")
}

// boundTo is a record of addr bound to pod ns/name at resourceVersion rv.
func boundTo(addr, ns, name, rv string) *estuaryv1.IPInstance {
	a := netip.MustParseAddr(addr)
	return &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(a), ResourceVersion: rv},
		Spec: estuaryv1.IPInstanceSpec{Subnet: "sn", Address: estuaryv1.InstanceAddress{IP: addr + "/24"},
			Binding: estuaryv1.Binding{Namespace: ns, PodName: name, PodUID: name + "-uid"}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound},
	}
}

// retained is what letting pod name's address addr be kept for its
// name writes.
func retained(addr, name string) holding {
	a := netip.MustParseAddr(addr)
	return holding{lease: ipam.Lease{Subnet: "sn", Addr: a, Family: family.Of(a)}, name: estuaryv1.InstanceName(a),
		pod: name, phase: estuaryv1.IPInstanceRetained}
}

// A record another pod holds is never overwritten: the write fails with a
// *heldElsewhere naming the holder, and nothing is written.
func TestWriteBindingLeavesARecordHeldElsewhere(t *testing.T) {
	other := boundTo("10.0.0.5", "ns", "b", "7")
	s := &fakeStore{cached: map[string]*estuaryv1.IPInstance{other.Name: other}, live: map[string]*estuaryv1.IPInstance{other.Name: other}}
	l := &ledger{store: s}
	err := l.writeBinding(context.Background(), "ns/a", retained("10.0.0.5", "a"), heldBy("ns/a", estuaryv1.IPInstanceBound))
	he, ok := asHeldElsewhere(err)
	if !ok || recordKey(he.record) != "ns/b" {
		t.Fatalf("err = %v, want a *heldElsewhere naming ns/b", err)
	}
	if len(s.updates) > 0 {
		t.Errorf("wrote %d updates over another pod's record", len(s.updates))
	}
}

// A cache that is behind (it shows the record held elsewhere) is not the
// last word: the record is read live, and written when it is held as
// expected, at the live resourceVersion.
func TestWriteBindingReadsLiveWhenTheCacheIsBehind(t *testing.T) {
	stale := boundTo("10.0.0.6", "ns", "b", "3")
	current := boundTo("10.0.0.6", "ns", "a", "9")
	s := &fakeStore{cached: map[string]*estuaryv1.IPInstance{stale.Name: stale}, live: map[string]*estuaryv1.IPInstance{current.Name: current}}
	l := &ledger{store: s}
	if err := l.writeBinding(context.Background(), "ns/a", retained("10.0.0.6", "a"), heldBy("ns/a", estuaryv1.IPInstanceBound)); err != nil {
		t.Fatal(err)
	}
	if len(s.updates) != 1 || s.updates[0].Status.Phase != estuaryv1.IPInstanceRetained || s.updates[0].Spec.Binding.PodName != "a" {
		t.Fatalf("updates %+v, want one write keeping the record Retained for pod a", s.updates)
	}
}

// A record that already says what the write would say is not written
// again (a write whose answer was lost, tried again).
func TestWriteBindingSkipsARecordThatSaysItAlready(t *testing.T) {
	done := boundTo("10.0.0.7", "ns", "a", "4")
	applyHolding(done, retained("10.0.0.7", "a"))
	s := &fakeStore{cached: map[string]*estuaryv1.IPInstance{done.Name: done}, live: map[string]*estuaryv1.IPInstance{done.Name: done}}
	l := &ledger{store: s}
	if err := l.writeBinding(context.Background(), "ns/a", retained("10.0.0.7", "a"), heldBy("ns/a", estuaryv1.IPInstanceBound)); err != nil {
		t.Fatal(err)
	}
	if len(s.updates) > 0 {
		t.Errorf("wrote %d updates to a record that already said it", len(s.updates))
	}
}
