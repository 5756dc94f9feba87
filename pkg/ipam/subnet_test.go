package ipam

import (
	"net/netip"
	"slices"
	"testing"
)

// drain allocates until the subnet is exhausted and returns what it handed out.
func drain(t *testing.T, a *Allocator, subnet string) []netip.Addr {
	t.Helper()
	var got []netip.Addr
	for {
		ad, err := a.AllocateIn(subnet, "o")
		if err != nil {
			wantErr(t, err, ErrExhausted, "no free address")
			return got
		}
		got = append(got, ad)
	}
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = ip(s)
	}
	return out
}

func TestNextFitNeverHandsOut(t *testing.T) {
	r := func(s string) []Range { return []Range{rng(t, s)} }
	tests := []struct {
		name string
		cfg  SubnetConfig
		want []netip.Addr // everything next-fit hands out, in order
	}{
		{"network and broadcast", SubnetConfig{Prefix: pfx("10.0.0.0/29")},
			addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6")},
		{"gateway", SubnetConfig{Prefix: pfx("10.0.0.0/29"), Gateway: ip("10.0.0.3")},
			addrs("10.0.0.1", "10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6")},
		{"excluded", SubnetConfig{Prefix: pfx("10.0.0.0/29"), Excluded: r("10.0.0.2-10.0.0.4")},
			addrs("10.0.0.1", "10.0.0.5", "10.0.0.6")},
		{"reserved skipped", SubnetConfig{Prefix: pfx("10.0.0.0/29"), Reserved: r("10.0.0.1-10.0.0.2")},
			addrs("10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6")},
		{"start and end", SubnetConfig{Prefix: pfx("10.0.0.0/24"), Start: ip("10.0.0.100"), End: ip("10.0.0.102")},
			addrs("10.0.0.100", "10.0.0.101", "10.0.0.102")},
		{"everything excluded", SubnetConfig{Prefix: pfx("10.0.0.0/29"), Excluded: r("10.0.0.0-10.0.0.7")}, nil},
		{"v6 network address (subnet-router anycast)", SubnetConfig{Prefix: pfx("fd00::/126"), Start: ip("fd00::")},
			addrs("fd00::1", "fd00::2", "fd00::3")},
		{"v6 top of a /64", SubnetConfig{Prefix: pfx("fd00::/64"), Start: ip("fd00::ffff:ffff:ffff:fffc"),
			Excluded: r("fd00::ffff:ffff:ffff:fffe")},
			addrs("fd00::ffff:ffff:ffff:fffc", "fd00::ffff:ffff:ffff:fffd", "fd00::ffff:ffff:ffff:ffff")},
		{"v6 chunk boundary", SubnetConfig{Prefix: pfx("fd00::/64"), Start: ip("fd00::3fe"), End: ip("fd00::401"),
			Reserved: r("fd00::3ff-fd00::400")},
			addrs("fd00::3fe", "fd00::401")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name, tc.cfg.Network = "s", "n"
			a := newWith(t, tc.cfg)
			got := drain(t, a, "s")
			if !slices.Equal(got, tc.want) {
				t.Fatalf("handed out %v, want %v", got, tc.want)
			}
			if st := stats(t, a, "s"); st.Available != 0 || st.Used != uint64(len(tc.want)) {
				t.Fatalf("stats after draining: %+v", st)
			}
		})
	}
}

func TestNextFitCooldownAndWrap(t *testing.T) {
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/29")})
	got := allocN(t, a, "s", "o", 2) // .1 .2
	wantErr(t, a.Release("s", got[0], "o"), nil, "")
	// .1 was just released: next-fit goes on to .3 .. .6 before wrapping to it.
	more := allocN(t, a, "s", "o", 5)
	if want := addrs("10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.1"); !slices.Equal(more, want) {
		t.Fatalf("got %v, want %v", more, want)
	}
	c, err := a.Cursor("s")
	if err != nil || c != ip("10.0.0.1") {
		t.Fatalf("cursor %v, %v", c, err)
	}
}

func TestSetCursor(t *testing.T) {
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/24")})
	if c, _ := a.Cursor("s"); c != ip("10.0.0.254") {
		t.Fatalf("initial cursor %s, want End", c)
	}
	tests := []struct {
		cursor string
		next   string
		kind   error
	}{
		{"10.0.0.10", "10.0.0.11", nil},
		{"10.0.0.254", "10.0.0.1", nil}, // at End: wraps to Start
		{"10.0.0.255", "10.0.0.2", nil}, // broadcast is in the prefix; .1 is taken now
		{"10.0.0.0", "10.0.0.3", nil},   // network address
		{"10.0.1.0", "", ErrOutOfRange}, // outside the prefix
		{"fd00::1", "", ErrOutOfRange},  // wrong family
	}
	for _, tc := range tests {
		err := a.SetCursor("s", ip(tc.cursor))
		wantErr(t, err, tc.kind, "")
		if tc.kind != nil {
			continue
		}
		got, err := a.AllocateIn("s", "o")
		if err != nil || got != ip(tc.next) {
			t.Fatalf("after SetCursor(%s): got %v, %v; want %s", tc.cursor, got, err, tc.next)
		}
	}
	wantErr(t, a.SetCursor("nope", ip("10.0.0.1")), ErrUnknownSubnet, "")
}

func TestAssign(t *testing.T) {
	cfg := SubnetConfig{Name: "pods-v4", Network: "n", Prefix: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.1"),
		Start: ip("10.0.0.10"), End: ip("10.0.0.200"),
		Reserved: []Range{rng(t, "10.0.0.20-10.0.0.29")}, Excluded: []Range{rng(t, "10.0.0.50-10.0.0.59")}}
	tests := []struct {
		name   string
		addr   string
		owner  string
		kind   error
		substr string
	}{
		{"free", "10.0.0.100", "b", nil, ""},
		{"reserved allowed explicitly", "10.0.0.25", "b", nil, ""},
		{"same owner again is a no-op", "10.0.0.11", "a", nil, ""},
		{"held by another", "10.0.0.11", "b", ErrInUse, `address 10.0.0.11 is allocated by "a" (requested by "b")`},
		{"retained by another", "10.0.0.12", "b", ErrInUse, `address 10.0.0.12 is retained by "a"`},
		{"gateway", "10.0.0.1", "b", ErrExcluded, `subnet "pods-v4": address 10.0.0.1 is excluded (gateway)`},
		{"network", "10.0.0.0", "b", ErrExcluded, "excluded (network address)"},
		{"broadcast", "10.0.0.255", "b", ErrExcluded, "excluded (broadcast address)"},
		{"excluded range", "10.0.0.55", "b", ErrExcluded, "excluded (excluded range)"},
		{"before start", "10.0.0.9", "b", ErrOutOfRange, "outside the allocatable range [10.0.0.10, 10.0.0.200]"},
		{"after end", "10.0.0.201", "b", ErrOutOfRange, "outside the allocatable range"},
		{"outside prefix", "10.0.1.5", "b", ErrOutOfRange, `subnet "pods-v4" (10.0.0.0/24): address 10.0.1.5 is outside the prefix`},
		{"other family", "fd00::5", "b", ErrOutOfRange, "outside the prefix"},
		{"invalid address", "", "b", ErrOutOfRange, ""},
		{"empty owner", "10.0.0.101", "", ErrInvalidRequest, "owner is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newWith(t, cfg)
			wantErr(t, a.Assign("pods-v4", ip("10.0.0.11"), "a"), nil, "")
			wantErr(t, a.Assign("pods-v4", ip("10.0.0.12"), "a"), nil, "")
			wantErr(t, a.Retain("pods-v4", ip("10.0.0.12"), "a"), nil, "")
			var addr netip.Addr
			if tc.addr != "" {
				addr = ip(tc.addr)
			}
			before := a.Records()
			err := a.Assign("pods-v4", addr, tc.owner)
			wantErr(t, err, tc.kind, tc.substr)
			if tc.kind != nil {
				if after := a.Records(); !slices.Equal(before, after) {
					t.Fatalf("failed Assign changed state: %v -> %v", before, after)
				}
				return
			}
			r, err := a.Lookup("pods-v4", addr)
			if err != nil || r.Owner != tc.owner || r.State != Allocated {
				t.Fatalf("Lookup after Assign: %+v, %v", r, err)
			}
		})
	}
	wantErr(t, New().Assign("nope", ip("10.0.0.1"), "a"), ErrUnknownSubnet, `subnet "nope": no such subnet`)
}

func TestAssignedAddressIsSkippedByNextFit(t *testing.T) {
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/29")})
	wantErr(t, a.Assign("s", ip("10.0.0.1"), "x"), nil, "")
	wantErr(t, a.Assign("s", ip("10.0.0.3"), "x"), nil, "")
	if got := drain(t, a, "s"); !slices.Equal(got, addrs("10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6")) {
		t.Fatalf("got %v", got)
	}
}

func TestReleaseAndRetain(t *testing.T) {
	const s = "s"
	tests := []struct {
		name   string
		op     func(a *Allocator) error
		kind   error
		substr string
		want   []Record // state afterwards
	}{
		{"release own", func(a *Allocator) error { return a.Release(s, ip("10.0.0.1"), "a") }, nil, "",
			[]Record{{s, ip("10.0.0.2"), Retained, "a"}}},
		{"release retained by owner", func(a *Allocator) error { return a.Release(s, ip("10.0.0.2"), "a") }, nil, "",
			[]Record{{s, ip("10.0.0.1"), Allocated, "a"}}},
		{"release someone else's", func(a *Allocator) error { return a.Release(s, ip("10.0.0.1"), "b") }, ErrInUse,
			`address 10.0.0.1 is allocated by "a" (requested by "b")`, nil},
		{"release free", func(a *Allocator) error { return a.Release(s, ip("10.0.0.3"), "a") }, ErrNotAllocated,
			`subnet "s": address 10.0.0.3 is not allocated`, nil},
		{"release outside", func(a *Allocator) error { return a.Release(s, ip("10.9.0.3"), "a") }, ErrOutOfRange, "outside the prefix", nil},
		{"release unknown subnet", func(a *Allocator) error { return a.Release("x", ip("10.0.0.1"), "a") }, ErrUnknownSubnet, "", nil},
		{"retain own", func(a *Allocator) error { return a.Retain(s, ip("10.0.0.1"), "a") }, nil, "",
			[]Record{{s, ip("10.0.0.1"), Retained, "a"}, {s, ip("10.0.0.2"), Retained, "a"}}},
		{"retain twice is a no-op", func(a *Allocator) error { return a.Retain(s, ip("10.0.0.2"), "a") }, nil, "", nil},
		{"retain someone else's", func(a *Allocator) error { return a.Retain(s, ip("10.0.0.1"), "b") }, ErrInUse, `allocated by "a"`, nil},
		{"retain free", func(a *Allocator) error { return a.Retain(s, ip("10.0.0.5"), "a") }, ErrNotAllocated, "", nil},
		{"assign retained by owner re-allocates", func(a *Allocator) error { return a.Assign(s, ip("10.0.0.2"), "a") }, nil, "",
			[]Record{{s, ip("10.0.0.1"), Allocated, "a"}, {s, ip("10.0.0.2"), Allocated, "a"}}},
		{"assign retained by another fails", func(a *Allocator) error { return a.Assign(s, ip("10.0.0.2"), "b") }, ErrInUse,
			`address 10.0.0.2 is retained by "a"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newWith(t, SubnetConfig{Name: s, Network: "n", Prefix: pfx("10.0.0.0/29")})
			allocN(t, a, s, "a", 2)
			wantErr(t, a.Retain(s, ip("10.0.0.2"), "a"), nil, "")
			before := a.Records()
			err := tc.op(a)
			wantErr(t, err, tc.kind, tc.substr)
			want := tc.want
			if want == nil {
				want = before
			}
			if got := a.Records(); !slices.Equal(got, want) {
				t.Fatalf("records %v, want %v", got, want)
			}
		})
	}
}

func TestRetainedIsNotFree(t *testing.T) {
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/30")})
	got := allocN(t, a, "s", "a", 2)
	wantErr(t, a.Retain("s", got[0], "a"), nil, "")
	wantErr(t, a.Release("s", got[1], "a"), nil, "")
	// Only .2 is free; the retained .1 is never handed to anyone.
	next := allocN(t, a, "s", "b", 1)
	if next[0] != got[1] {
		t.Fatalf("got %v, want %v", next[0], got[1])
	}
	_, err := a.AllocateIn("s", "b")
	wantErr(t, err, ErrExhausted, `subnet "s" (10.0.0.0/30): no free address in [10.0.0.1, 10.0.0.2]`)
}

func TestStats(t *testing.T) {
	cfg := SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.1"),
		Start: ip("10.0.0.1"), End: ip("10.0.0.100"),
		Reserved: []Range{rng(t, "10.0.0.90-10.0.0.110")}, // partly outside the window
		Excluded: []Range{rng(t, "10.0.0.50-10.0.0.59"), rng(t, "10.0.0.95")}}
	// Window 100 addresses, minus gateway and 11 excluded = 88; reserved in it: .90-.100 minus .95 = 10.
	tests := []struct {
		name string
		op   func(t *testing.T, a *Allocator)
		want Stats
	}{
		{"empty", func(*testing.T, *Allocator) {}, Stats{Total: 88, Reserved: 10, Available: 78}},
		{"allocated", func(t *testing.T, a *Allocator) { allocN(t, a, "s", "o", 3) },
			Stats{Total: 88, Reserved: 10, Used: 3, Available: 75}},
		{"retained", func(t *testing.T, a *Allocator) {
			wantErr(t, a.Retain("s", allocN(t, a, "s", "o", 3)[1], "o"), nil, "")
		}, Stats{Total: 88, Reserved: 10, Used: 3, Retained: 1, Available: 75}},
		{"reserved assigned", func(t *testing.T, a *Allocator) { wantErr(t, a.Assign("s", ip("10.0.0.91"), "o"), nil, "") },
			Stats{Total: 88, Reserved: 10, Used: 1, Available: 78}},
		{"released", func(t *testing.T, a *Allocator) {
			wantErr(t, a.Release("s", allocN(t, a, "s", "o", 3)[1], "o"), nil, "")
		}, Stats{Total: 88, Reserved: 10, Used: 2, Available: 76}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newWith(t, cfg)
			tc.op(t, a)
			if got := stats(t, a, "s"); got != tc.want {
				t.Fatalf("stats %+v, want %+v", got, tc.want)
			}
		})
	}
	_, err := New().Stats("nope")
	wantErr(t, err, ErrUnknownSubnet, "")
}

func TestHugeRangesCostOneEntry(t *testing.T) {
	cfg := SubnetConfig{Name: "s", Network: "n", Prefix: pfx("fd00::/64"),
		Excluded: []Range{rng(t, "fd00::1-fd00::ff:ffff:ffff")}} // 2^40 - 1 addresses
	a := newWith(t, cfg)
	sub, _ := a.subnet("s")
	if n := len(sub.lay.blocked); n != 1 {
		t.Fatalf("blocked list has %d entries, want 1 (offset 0 merges with the excluded range)", n)
	}
	if st := stats(t, a, "s"); st.Total != ^uint64(0)-(1<<40-1) {
		t.Fatalf("total %d", st.Total)
	}
	got := allocN(t, a, "s", "o", 2)
	if !slices.Equal(got, addrs("fd00::100:0:0", "fd00::100:0:1")) {
		t.Fatalf("got %v", got)
	}
	// Excluding the whole /64 leaves nothing, counted without overflow.
	cfg.Excluded = []Range{rng(t, "fd00::-fd00::ffff:ffff:ffff:ffff")}
	wantErr(t, a.UpdateSubnet(cfg), nil, "")
	if st := stats(t, a, "s"); st != (Stats{Used: 2, Stranded: 2}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestNearlyFullSearchSkipsChunks(t *testing.T) {
	// A /12 filled but for one address right behind the cursor: next-fit has to
	// cross all full chunks; the second level makes that a handful of lookups.
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/12")})
	sub, _ := a.subnet("s")
	sub.mu.Lock()
	l := sub.lay
	for off := l.start; off <= l.end; off++ {
		sub.h.bits.set(off)
	}
	hole := l.start + 5000
	sub.h.bits.clear(hole)
	sub.cursor = hole
	off, ok := sub.nextFit()
	sub.mu.Unlock()
	if !ok || off != hole {
		t.Fatalf("nextFit = %d, %v; want %d", off, ok, hole)
	}
	if n, want := len(sub.h.bits.full), (1<<20>>chunkShift)/chunkBits; n != want {
		t.Fatalf("second level has %d entries, want %d", n, want)
	}
}
