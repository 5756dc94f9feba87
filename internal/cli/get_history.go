package cli

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// readHistory reads the IPHistory of a; a missing one is an empty history.
func readHistory(ctx context.Context, k client.Client, a netip.Addr) (*estuaryv1.IPHistory, error) {
	h := &estuaryv1.IPHistory{}
	err := k.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(a)}, h)
	if apierrors.IsNotFound(err) {
		h.Name, h.Spec.Address = estuaryv1.InstanceName(a), a.String()
		h.APIVersion, h.Kind = estuaryv1.GroupVersion.String(), "IPHistory"
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get iphistory %s: %w", estuaryv1.InstanceName(a), err)
	}
	return h, nil
}

// getIPHistory prints every recorded move of a, newest first.
func getIPHistory(ctx context.Context, k client.Client, s Streams, out *output, a netip.Addr) error {
	h, err := readHistory(ctx, k, a)
	if err != nil {
		return err
	}
	slices.Reverse(h.Spec.Entries)
	table, wide := out.table()
	if !table {
		return out.object(s.Out, h)
	}
	if len(h.Spec.Entries) == 0 {
		return say(s.Err, "no history recorded for address %s (iphistory %s)", a, h.Name)
	}
	t := newTable()
	cols := []string{"TIME", "MOVE", "NAMESPACE", "POD", "OWNER", "NODE", "MAC"}
	if wide {
		cols = append(cols, "SUBNET", "POD UID")
	}
	t.row("%s\n", strings.Join(cols, "\t"))
	for _, e := range h.Spec.Entries {
		vals := []string{e.Time.UTC().Format(time.RFC3339), string(e.Move), orDash(e.Namespace), orDash(e.Pod),
			entryOwner(e), orDash(e.Node), orDash(e.MAC)}
		if wide {
			vals = append(vals, orDash(e.Subnet), orDash(e.PodUID))
		}
		t.row("%s\n", strings.Join(vals, "\t"))
	}
	return t.writeTo(s.Out)
}

// moveVerb is how a move reads in a sentence.
func moveVerb(m estuaryv1.AddressMove) string {
	if m == estuaryv1.MoveHandedOver {
		return "handed over"
	}
	return strings.ToLower(string(m))
}

func entryOwner(e estuaryv1.AddressHistoryEntry) string {
	if e.OwnerKind == "" {
		return "-"
	}
	return e.OwnerKind + "/" + e.OwnerName
}

// heldAt is the answer of --at: who held an address at an instant.
type heldAt struct {
	Address string `json:"address"`
	At      string `json:"at"`
	// Free: no pod or workload held the address at that instant (or
	// nothing recorded says one did).
	Free bool `json:"free"`
	// Entry is the move that gave the address to its holder then.
	Entry *estuaryv1.AddressHistoryEntry `json:"entry,omitempty"`
}

// holderAt is the entry in force at t: the last one not after it, unless
// that one released the address.
func holderAt(entries []estuaryv1.AddressHistoryEntry, t time.Time) *estuaryv1.AddressHistoryEntry {
	var last *estuaryv1.AddressHistoryEntry
	for i := range entries {
		if entries[i].Time.After(t) {
			break
		}
		last = &entries[i]
	}
	if last == nil || last.Move == estuaryv1.MoveReleased {
		return nil
	}
	return last
}

// getIPAt prints who held a at instant at, or that it was free.
func getIPAt(ctx context.Context, k client.Client, s Streams, format string, a netip.Addr, at time.Time) error {
	h, err := readHistory(ctx, k, a)
	if err != nil {
		return err
	}
	ans := heldAt{Address: a.String(), At: at.UTC().Format(time.RFC3339), Entry: holderAt(h.Spec.Entries, at)}
	ans.Free = ans.Entry == nil
	if format != "text" {
		return report(s.Out, format, ans)
	}
	e := ans.Entry
	switch {
	case e == nil:
		return say(s.Out, "%s at %s: free", ans.Address, ans.At)
	case e.Move == estuaryv1.MoveKept:
		return say(s.Out, "%s at %s: kept for %s %s/%s (no pod; last pod %s, since %s)", ans.Address, ans.At,
			e.OwnerKind, e.Namespace, e.OwnerName, orDash(e.Pod), e.Time.UTC().Format(time.RFC3339))
	}
	return say(s.Out, "%s at %s: pod %s/%s (owner %s, node %s, MAC %s), %s at %s", ans.Address, ans.At,
		e.Namespace, e.Pod, entryOwner(*e), orDash(e.Node), orDash(e.MAC), moveVerb(e.Move), e.Time.UTC().Format(time.RFC3339))
}

// parseAt parses --at: an RFC 3339 time.
func parseAt(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("get ip: --at %q: must be an RFC 3339 time such as 2026-03-10T14:00:00Z: %w", v, err)
	}
	return t, nil
}

// runIPAt is `get ip ADDRESS --at TIME`.
func runIPAt(ctx context.Context, o *options, out *output, a netip.Addr, at string, history bool) error {
	if history {
		return fmt.Errorf("get ip: --at and --history: give one")
	}
	t, err := parseAt(at)
	if err != nil {
		return err
	}
	format := out.format()
	if format == "" {
		format = "text"
	}
	if err := checkReportFormat("get ip --at", format); err != nil {
		return err
	}
	k, err := o.newClient()
	if err != nil {
		return err
	}
	return getIPAt(ctx, k, o.streams, format, a, t)
}
