package podipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// historyOf reads addr's history entries live; none when it has no
// IPHistory.
func historyOf(t *testing.T, addr netip.Addr) []estuaryv1.AddressHistoryEntry {
	t.Helper()
	h := &estuaryv1.IPHistory{}
	err := k8s.Get(bg(), client.ObjectKey{Name: estuaryv1.InstanceName(addr)}, h)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return h.Spec.Entries
}

func movesOf(es []estuaryv1.AddressHistoryEntry) []estuaryv1.AddressMove {
	out := make([]estuaryv1.AddressMove, len(es))
	for i, e := range es {
		out[i] = e.Move
	}
	return out
}

// waitHistory waits until addr's history is exactly the moves want, in
// order, and returns its entries.
func waitHistory(t *testing.T, addr netip.Addr, want ...estuaryv1.AddressMove) []estuaryv1.AddressHistoryEntry {
	t.Helper()
	var es []estuaryv1.AddressHistoryEntry
	eventually(t, fmt.Sprintf("history of %s is %v", addr, want), func() error {
		es = historyOf(t, addr)
		if got := movesOf(es); !slices.Equal(got, want) {
			return fmt.Errorf("history %v", got)
		}
		return nil
	})
	return es
}

// cleanHistories deletes the IPHistories whose names start with prefix,
// now and when the test ends: histories outlive the records by design.
func cleanHistories(t *testing.T, prefix string) {
	t.Helper()
	clean := func() {
		var list estuaryv1.IPHistoryList
		if err := k8s.List(bg(), &list); err != nil {
			t.Errorf("list iphistories: %v", err)
			return
		}
		for i := range list.Items {
			if strings.HasPrefix(list.Items[i].Name, prefix) {
				_ = k8s.Delete(bg(), &list.Items[i])
			}
		}
	}
	clean()
	t.Cleanup(clean)
}

func checkEntry(t *testing.T, e estuaryv1.AddressHistoryEntry, move estuaryv1.AddressMove, ns, pod, ownerKind, ownerName, node string) {
	t.Helper()
	got := []string{string(e.Move), e.Namespace, e.Pod, e.OwnerKind, e.OwnerName, e.Node}
	want := []string{string(move), ns, pod, ownerKind, ownerName, node}
	if !slices.Equal(got, want) {
		t.Errorf("entry %s: move, namespace, pod, owner kind, owner name, node = %v, want %v", e.ID, got, want)
	}
	if e.Time.IsZero() || e.ID == "" {
		t.Errorf("entry %+v has no time or no ID", e)
	}
}

// Each move of an address is one entry, in order, naming the pod, its
// namespace, owner, node and MAC: allocated to a retaining Deployment's
// pod on node-a, kept when the pod goes, handed over to the next
// ReplicaSet's pod on node-b; a bare pod's address is allocated, then
// released.
func TestHistoryRecordsEachMove(t *testing.T) {
	overlay(t, "ov-hist", "10.140.0.0/24")
	cleanHistories(t, "10.140.0.")
	ns := newNamespace(t, nil)
	startManager(t)

	addr, next := keptAddress(t, ns, "ov-hist")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	newPod(t, ns, "web-b-0", next, retain, onNetwork("ov-hist"), onNode("node-b"))
	waitInstances(t, ns, "web-b-0", 1, estuaryv1.IPInstanceBound)
	es := waitHistory(t, addr, estuaryv1.MoveAllocated, estuaryv1.MoveKept, estuaryv1.MoveHandedOver)
	checkEntry(t, es[0], estuaryv1.MoveAllocated, ns, "web-a-0", "Deployment", "web", "node-a")
	checkEntry(t, es[1], estuaryv1.MoveKept, ns, "web-a-0", "Deployment", "web", "node-a")
	checkEntry(t, es[2], estuaryv1.MoveHandedOver, ns, "web-b-0", "Deployment", "web", "node-b")
	if es[0].MAC == "" || es[2].MAC != es[0].MAC {
		t.Errorf("MACs %q then %q: want the kept address's stable MAC in both", es[0].MAC, es[2].MAC)
	}
	if es[0].PodUID == "" || es[1].PodUID != "" || es[2].PodUID == es[0].PodUID {
		t.Errorf("pod UIDs %q, %q, %q: want the first pod's, none while kept, the next pod's", es[0].PodUID, es[1].PodUID, es[2].PodUID)
	}

	solo := newPod(t, ns, "solo", onNetwork("ov-hist"))
	rec := waitInstances(t, ns, "solo", 1, estuaryv1.IPInstanceBound)
	deletePod(t, solo)
	es = waitHistory(t, addrOf(t, rec[0]), estuaryv1.MoveAllocated, estuaryv1.MoveReleased)
	checkEntry(t, es[0], estuaryv1.MoveAllocated, ns, "solo", "Pod", "solo", "node-a")
	checkEntry(t, es[1], estuaryv1.MoveReleased, ns, "solo", "Pod", "solo", "node-a")
}

// A new manager against the same API server keeps what the first wrote
// and appends after it, without writing an entry twice.
func TestHistorySurvivesManagerRestart(t *testing.T) {
	overlay(t, "ov-hist-restart", "10.141.0.0/24")
	cleanHistories(t, "10.141.0.")
	ns := newNamespace(t, nil)
	stop := startManager(t)
	p := newPod(t, ns, "p", onNetwork("ov-hist-restart"))
	addr := addrOf(t, waitInstances(t, ns, "p", 1, estuaryv1.IPInstanceBound)[0])
	first := waitHistory(t, addr, estuaryv1.MoveAllocated)
	stop()

	startManager(t)
	deletePod(t, p)
	es := waitHistory(t, addr, estuaryv1.MoveAllocated, estuaryv1.MoveReleased)
	if es[0].ID != first[0].ID || !es[0].Time.Equal(&first[0].Time) {
		t.Errorf("first entry %+v after the restart, want %+v", es[0], first[0])
	}
}

// failingHistory fails every IPHistory write while fail is set.
type failingHistory struct{ fail atomic.Bool }

func (f *failingHistory) wrap(c client.WithWatch) client.Client {
	refuse := func(obj client.Object) error {
		if _, ok := obj.(*estuaryv1.IPHistory); ok && f.fail.Load() {
			return apierrors.NewServiceUnavailable("history writes are failing in this test")
		}
		return nil
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
	})
}

// A history the API server refuses to store fails no allocation: the pod
// is given its address, the failure is counted, and the entry is written
// once the API server takes it.
func TestHistoryWriteFailureDoesNotFailAllocation(t *testing.T) {
	overlay(t, "ov-hist-fail", "10.142.0.0/24")
	cleanHistories(t, "10.142.0.")
	ns := newNamespace(t, nil)
	f := &failingHistory{}
	f.fail.Store(true)
	c, _ := startControllers(t, testManager{rc: cfg, client: f.wrap})
	eventually(t, "allocator rebuilt", func() error { return c.pods.Ready() })

	newPod(t, ns, "p", onNetwork("ov-hist-fail"))
	addr := addrOf(t, waitInstances(t, ns, "p", 1, estuaryv1.IPInstanceBound)[0])
	eventually(t, "a failed history write counted", func() error {
		if n := testutil.ToFloat64(c.pods.metrics.historyFailures); n < 1 {
			return fmt.Errorf("%v failures counted", n)
		}
		return nil
	})
	if es := historyOf(t, addr); len(es) != 0 {
		t.Fatalf("history %v written while writes fail", movesOf(es))
	}
	f.fail.Store(false)
	waitHistory(t, addr, estuaryv1.MoveAllocated)
}

func entryAt(id string, at time.Time) estuaryv1.AddressHistoryEntry {
	return estuaryv1.AddressHistoryEntry{ID: id, Time: metav1.NewTime(at.UTC().Truncate(time.Second)), Move: estuaryv1.MoveAllocated, Namespace: "ns", Pod: id}
}

// The writer keeps at most MaxEntries per address, the newest, and none
// older than MaxAge: on each write, and, for addresses no longer written,
// by its sweep, which deletes a history left empty.
func TestHistoryBoundsByCountAndAge(t *testing.T) {
	cleanHistories(t, "10.143.0.")
	failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "f"})
	w := newHistoryWriter(k8s, k8s, HistoryOptions{MaxEntries: 3, MaxAge: time.Hour}, failures)
	now := time.Now()
	w.now = func() time.Time { return now }

	old := entryAt("old", now.Add(-2*time.Hour))
	var fresh []estuaryv1.AddressHistoryEntry
	for i := range 5 {
		fresh = append(fresh, entryAt(fmt.Sprintf("e%d", i), now.Add(time.Duration(i-10)*time.Minute)))
	}
	if err := w.write(bg(), "10.143.0.1", append([]estuaryv1.AddressHistoryEntry{old}, fresh[:2]...)); err != nil {
		t.Fatal(err)
	}
	if err := w.write(bg(), "10.143.0.1", fresh[1:]); err != nil { // e1 again: stored once
		t.Fatal(err)
	}
	ids := func(addr string) []string {
		var out []string
		for _, e := range historyOf(t, netip.MustParseAddr(addr)) {
			out = append(out, e.ID)
		}
		return out
	}
	if got := ids("10.143.0.1"); !slices.Equal(got, []string{"e2", "e3", "e4"}) {
		t.Errorf("after writes: %v, want the newest 3 (e2 e3 e4)", got)
	}

	if err := w.write(bg(), "10.143.0.2", fresh[:1]); err != nil {
		t.Fatal(err)
	}
	now = now.Add(53*time.Minute + 30*time.Second) // e0 to e3 are older than an hour now, e4 is not
	if err := w.sweep(bg()); err != nil {
		t.Fatal(err)
	}
	if got := ids("10.143.0.1"); !slices.Equal(got, []string{"e4"}) {
		t.Errorf("after the sweep: %v, want e4 only", got)
	}
	h := &estuaryv1.IPHistory{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "10.143.0.2"}, h); !apierrors.IsNotFound(err) {
		t.Errorf("history of 10.143.0.2 with every entry aged out: %v, want deleted (%d entries)", err, len(h.Spec.Entries))
	}
	if n := testutil.ToFloat64(failures); n != 0 {
		t.Errorf("%v failures counted", n)
	}
}

// With the history on, a pod costs one history write besides its one
// record write: a create for a new address, an update for a kept one
// handed over. Allocation itself still writes one record (the test in
// writes_test.go counts the same with the history off).
func TestAllocationHistoryWritesPerPod(t *testing.T) {
	const pods = 20
	cleanHistories(t, "10.144.0.")
	fresh, kept := churnWrites(t, "ov-writes-hist", "10.144.0.0/24", "10.144.0.", pods, HistoryOptions{},
		func(recs []estuaryv1.IPInstance, step int) { waitHistories(t, recs, step) })
	t.Logf("writes with the history on, for %d new pods: %v; for %d pods taking kept addresses: %v", pods, fresh, pods, kept)
	checkWritesPerPod(t, pods, fresh, kept, "*v1.IPInstance", "*v1.IPHistory")
}

// waitHistories waits until every record's address has n history entries.
func waitHistories(t *testing.T, recs []estuaryv1.IPInstance, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d history entries for each address", n), func() error {
		for _, rec := range recs {
			if got := len(historyOf(t, addrOf(t, rec))); got != n {
				return errors.New(rec.Name + ": " + fmt.Sprint(got) + " entries")
			}
		}
		return nil
	})
}
