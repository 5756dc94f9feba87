package cli

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// addressHistory stores the history of addr: allocated to web-0 on n1 at
// t0, kept at t0+1h, handed over to web-0's next pod on n2 at t0+2h,
// released at t0+3h.
func addressHistory(t *testing.T, addr string, t0 time.Time) {
	t.Helper()
	at := func(h int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(h) * time.Hour)) }
	e := func(id string, h int, mv estuaryv1.AddressMove, uid, node string) estuaryv1.AddressHistoryEntry {
		return estuaryv1.AddressHistoryEntry{ID: id, Time: at(h), Move: mv, Namespace: "db", Pod: "web-0", PodUID: uid,
			OwnerKind: "StatefulSet", OwnerName: "web", Node: node, MAC: "0a:58:0a:96:00:07", Subnet: "s"}
	}
	create(t, &estuaryv1.IPHistory{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(netip.MustParseAddr(addr))},
		Spec: estuaryv1.IPHistorySpec{Address: addr, Entries: []estuaryv1.AddressHistoryEntry{
			e("a", 0, estuaryv1.MoveAllocated, "uid-1", "n1"),
			e("k", 1, estuaryv1.MoveKept, "", "n1"),
			e("h", 2, estuaryv1.MoveHandedOver, "uid-2", "n2"),
			e("r", 3, estuaryv1.MoveReleased, "", "n2"),
		}},
	})
}

// `get ip ADDRESS --history` lists every move newest first, as a table
// and as the IPHistory object (-o json, -o yaml), IPv6 addresses too.
func TestGetIPHistory(t *testing.T) {
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for _, addr := range []string{"10.150.0.7", "fd00:150::7"} {
		addressHistory(t, addr, t0)
		out, err := run(t, "", "get", "ip", addr, "--history")
		if err != nil {
			t.Fatalf("%s: %v\n%s", addr, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 || !strings.HasPrefix(lines[0], "TIME") {
			t.Fatalf("%s: table\n%s\nwant a header and 4 rows", addr, out)
		}
		for i, want := range []string{"2026-03-10T15:00:00Z  Released", "2026-03-10T14:00:00Z  HandedOver", "2026-03-10T13:00:00Z  Kept", "2026-03-10T12:00:00Z  Allocated"} {
			if !strings.HasPrefix(lines[i+1], want) {
				t.Errorf("%s: row %d %q, want it to start %q", addr, i+1, lines[i+1], want)
			}
		}
		if !strings.Contains(lines[2], "StatefulSet/web") || !strings.Contains(lines[2], "n2") || !strings.Contains(lines[2], "0a:58:0a:96:00:07") {
			t.Errorf("%s: hand-over row %q lacks the owner, node or MAC", addr, lines[2])
		}
		for _, format := range []string{"json", "yaml"} {
			out, err := run(t, "", "get", "ip", addr, "--history", "-o", format)
			if err != nil {
				t.Fatalf("%s -o %s: %v\n%s", addr, format, err, out)
			}
			var h estuaryv1.IPHistory
			if err := yaml.Unmarshal([]byte(out), &h); err != nil {
				t.Fatalf("%s -o %s: %v\n%s", addr, format, err, out)
			}
			if h.Kind != "IPHistory" || len(h.Spec.Entries) != 4 || h.Spec.Entries[0].ID != "r" || h.Spec.Entries[3].ID != "a" {
				t.Errorf("%s -o %s: %s %+v, want the IPHistory with its entries newest first", addr, format, h.Kind, h.Spec.Entries)
			}
		}
	}
	out, err := run(t, "", "get", "ip", "10.150.0.8", "--history")
	if err != nil || !strings.Contains(out, "no history recorded for address 10.150.0.8") {
		t.Errorf("an address without history: %v\n%s", err, out)
	}
}

// `get ip ADDRESS --at TIME` names the holder at that instant: free
// before the first allocation, the pod while it held it, the workload
// while it kept it, the next pod after the hand-over, free after the
// release.
func TestGetIPAt(t *testing.T) {
	t0 := time.Date(2026, 3, 11, 12, 0, 0, 0, time.UTC)
	addressHistory(t, "10.150.1.7", t0)
	for _, tc := range []struct{ at, want string }{
		{"2026-03-11T11:59:59Z", "10.150.1.7 at 2026-03-11T11:59:59Z: free"},
		{"2026-03-11T12:00:00Z", "pod db/web-0 (owner StatefulSet/web, node n1, MAC 0a:58:0a:96:00:07), allocated at 2026-03-11T12:00:00Z"},
		{"2026-03-11T13:30:00+01:00", "pod db/web-0 (owner StatefulSet/web, node n1, MAC 0a:58:0a:96:00:07), allocated at"},
		{"2026-03-11T13:10:00Z", "kept for StatefulSet db/web (no pod; last pod web-0, since 2026-03-11T13:00:00Z)"},
		{"2026-03-11T14:59:00Z", "pod db/web-0 (owner StatefulSet/web, node n2, MAC 0a:58:0a:96:00:07), handed over at 2026-03-11T14:00:00Z"},
		{"2026-03-11T15:00:00Z", "10.150.1.7 at 2026-03-11T15:00:00Z: free"},
	} {
		out, err := run(t, "", "get", "ip", "10.150.1.7", "--at", tc.at)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("--at %s: %v\n%s\nwant %q", tc.at, err, out, tc.want)
		}
	}
	out, err := run(t, "", "get", "ip", "10.150.1.7", "--at", "2026-03-11T14:30:00Z", "-o", "json")
	if err != nil {
		t.Fatal(err, out)
	}
	var got heldAt
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err, out)
	}
	if got.Free || got.Entry == nil || got.Entry.ID != "h" || got.At != "2026-03-11T14:30:00Z" {
		t.Errorf("-o json: %+v, want the hand-over entry", got)
	}
	for _, args := range [][]string{{"--at", "yesterday"}, {"--at", "2026-03-11T14:30:00Z", "--history"}, {"--at", "2026-03-11T14:30:00Z", "-o", "wide"}} {
		out, err := run(t, "", append([]string{"get", "ip", "10.150.1.7"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--at") && !strings.Contains(err.Error(), "-o") {
			t.Errorf("%v: %v\n%s, want an error naming the flag", args, err, out)
		}
	}
}
