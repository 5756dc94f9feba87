package overlay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/resubscribe"
)

// Backoff bounds of the answerer's resubscription.
const (
	answerRetryFirst = 100 * time.Millisecond
	answerRetryLimit = 5 * time.Second
)

// Answer answers the kernel's neighbour misses on device until ctx ends:
// for every address the kernel asks user space to resolve (app_solicit),
// lookup gives the MAC of the VTEP behind it and Answer writes it as a
// REACHABLE entry (not PERMANENT, so a pod that moves is resolved again
// once the entry ages). Addresses lookup does not know are left to the
// kernel's next probe, a broadcast over the flood entries. A failed
// subscription is retried with backoff; Answer returns nil when ctx ends.
func (a *Agent) Answer(ctx context.Context, device string, lookup func(netip.Addr) (desired.MAC, bool)) error {
	h, err := ops.Open(a.hostNetns)
	if err != nil {
		return fmt.Errorf("answer misses on %s: %w", device, err)
	}
	defer h.Close()
	answer := func(ip netip.Addr) {
		mac, ok := lookup(ip)
		if !ok || mac.IsZero() {
			return
		}
		if err := h.Neighs().Set(desired.Neigh{Dev: device, IP: ip, MAC: mac}); err != nil {
			a.report(fmt.Errorf("answer miss on %s: %w", device, err))
		}
	}
	resubscribe.Run(ctx, answerRetryFirst, answerRetryLimit, func(ctx context.Context) error {
		return h.Neighs().WatchMisses(ctx, device, answer)
	}, func(err error, _ time.Duration) { a.report(err) })
	return nil
}

// Refresh rewrites the resolved neighbour entries on device (answers, or
// the kernel's own) whose MAC is not the VTEP lookup now gives for their
// address: a pod that moved to another node keeps its address. Ageing
// alone would not correct them, because the fast path encapsulates through
// an entry without ever making the kernel confirm it. Addresses lookup does
// not know are left alone. It returns how many entries it rewrote.
func (a *Agent) Refresh(device string, lookup func(netip.Addr) (desired.MAC, bool)) (int, error) {
	ns, err := a.h.Neighs().Resolved(device)
	if err != nil {
		return 0, fmt.Errorf("refresh neighbours: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range ns {
		mac, ok := lookup(e.IP)
		if !ok || mac.IsZero() || mac == e.MAC {
			continue
		}
		if err := a.h.Neighs().Set(desired.Neigh{Dev: device, IP: e.IP, MAC: mac}); err != nil {
			errs = append(errs, fmt.Errorf("refresh neighbours: %w", err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func (a *Agent) report(err error) {
	if err != nil && a.OnError != nil {
		a.OnError(err)
	}
}
