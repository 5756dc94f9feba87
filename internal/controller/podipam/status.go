package podipam

import (
	"context"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// StatusWriter publishes the allocator's counts in Subnet and Network status
// and as metrics. It writes off the allocation path, at most once per
// Interval per object and only when something changed, so allocation never
// waits for (or conflicts on) a status write.
type StatusWriter struct {
	Client   client.Client
	Alloc    Allocator
	Topology *Topology
	Metrics  *Metrics
	Ready    *readiness
	Interval time.Duration

	written map[string]any
	// measured are the subnets whose metrics the last pass published.
	measured map[string]bool
}

// NeedLeaderElection returns true: only the leader's allocator is
// authoritative.
func (w *StatusWriter) NeedLeaderElection() bool { return true }

// Start writes status until ctx ends.
func (w *StatusWriter) Start(ctx context.Context) error {
	if err := w.Ready.wait(ctx); err != nil {
		return nil //nolint:nilerr // the rebuild's failure is reported by the reconciler
	}
	if w.Interval <= 0 {
		w.Interval = 2 * time.Second
	}
	w.written = map[string]any{}
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		w.writeAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *StatusWriter) writeAll(ctx context.Context) {
	logger := log.FromContext(ctx)
	names := w.Alloc.Subnets()
	sort.Strings(names)
	for _, name := range names {
		if err := w.writeSubnet(ctx, name); err != nil {
			logger.Error(err, "write subnet status", "subnet", name)
		}
	}
	w.forgetRemoved(names)
	w.Topology.mu.RLock()
	nets := make([]string, 0, len(w.Topology.networks))
	for n := range w.Topology.networks {
		nets = append(nets, n)
	}
	w.Topology.mu.RUnlock()
	sort.Strings(nets)
	for _, name := range nets {
		if err := w.writeNetwork(ctx, name); err != nil {
			logger.Error(err, "write network status", "network", name)
		}
	}
}

// forgetRemoved drops the metrics of the subnets measured before and not
// among names (the allocator's now).
func (w *StatusWriter) forgetRemoved(names []string) {
	now := make(map[string]bool, len(names))
	for _, n := range names {
		now[n] = true
	}
	for n := range w.measured {
		if !now[n] {
			w.Metrics.forgetSubnet(n)
		}
	}
	w.measured = now
}

func (w *StatusWriter) writeSubnet(ctx context.Context, name string) error {
	st, err := w.Alloc.Stats(name)
	if err != nil {
		return nil //nolint:nilerr // removed since listed
	}
	want := subnetCounts{total: u64(st.Total), used: int64(st.Used), available: u64(st.Available)}
	if c, err := w.Alloc.Cursor(name); err == nil && c.IsValid() {
		want.last = c.String()
	}
	w.Metrics.setSubnet(name, st)
	if w.written["subnet/"+name] == want {
		return nil
	}
	sn := &estuaryv1.Subnet{}
	if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, sn); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch := client.MergeFrom(sn.DeepCopy())
	sn.Status.Total, sn.Status.Used, sn.Status.Available = want.total, want.used, want.available
	sn.Status.LastAllocatedIP = want.last
	sn.Status.ObservedGeneration = sn.Generation
	if err := w.Client.Status().Patch(ctx, sn, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	w.written["subnet/"+name] = want
	return nil
}

// subnetCounts and networkCounts are what was last written, to skip writes
// that would change nothing.
type subnetCounts struct {
	total, available, last string
	used                   int64
}

type networkCounts struct {
	subnets   string
	v4, v6    estuaryv1.AddressStatistics
	used      int64
	available string
}

func (w *StatusWriter) writeNetwork(ctx context.Context, name string) error {
	var subnets []string
	for _, sn := range w.Alloc.Subnets() {
		if cfg, err := w.Alloc.Subnet(sn); err == nil && cfg.Network == name {
			subnets = append(subnets, sn)
		}
	}
	sort.Strings(subnets)
	want := networkCounts{subnets: strings.Join(subnets, ",")}
	avail := new(big.Int)
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		st, err := w.Alloc.NetworkStats(name, f)
		if err != nil {
			continue
		}
		s := estuaryv1.AddressStatistics{Total: u64(st.Total), Used: int64(st.Used), Available: u64(st.Available)}
		if f == family.IPv4 {
			want.v4 = s
		} else {
			want.v6 = s
		}
		want.used += int64(st.Used)
		avail.Add(avail, new(big.Int).SetUint64(st.Available))
	}
	want.available = avail.String()
	if w.written["network/"+name] == want {
		return nil
	}
	n := &estuaryv1.Network{}
	if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Status.Subnets = subnets
	n.Status.IPv4, n.Status.IPv6 = statsOrNil(want.v4), statsOrNil(want.v6)
	n.Status.Used, n.Status.Available = want.used, want.available
	n.Status.ObservedGeneration = n.Generation
	if err := w.Client.Status().Patch(ctx, n, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	w.written["network/"+name] = want
	return nil
}

func statsOrNil(s estuaryv1.AddressStatistics) *estuaryv1.AddressStatistics {
	if s.Total == "" {
		return nil
	}
	return &s
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }
