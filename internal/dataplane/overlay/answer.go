package overlay

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
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
func (a *Agent) Answer(ctx context.Context, device string, lookup func(netip.Addr) (state.MAC, bool)) error {
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
		if err := h.SetNeigh(state.Neigh{Dev: device, IP: ip, MAC: mac}); err != nil {
			a.report(fmt.Errorf("answer miss on %s: %w", device, err))
		}
	}
	resubscribe.Run(ctx, answerRetryFirst, answerRetryLimit, func(ctx context.Context) error {
		return h.WatchNeighMisses(ctx, device, answer)
	}, func(err error, _ time.Duration) { a.report(err) })
	return nil
}

func (a *Agent) report(err error) {
	if err != nil && a.OnError != nil {
		a.OnError(err)
	}
}
