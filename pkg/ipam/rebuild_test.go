package ipam

import (
	"errors"
	"slices"
	"testing"
)

func rebuildAlloc(t *testing.T) *Allocator {
	return newWith(t,
		SubnetConfig{Name: "v4", Network: "n", Prefix: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.1"),
			Excluded: []Range{rng(t, "10.0.0.100-10.0.0.109")}},
		SubnetConfig{Name: "v6", Network: "n", Prefix: pfx("fd00::/64")},
	)
}

func TestRebuildRoundTrip(t *testing.T) {
	a := rebuildAlloc(t)
	allocN(t, a, "v4", "a", 5)
	allocN(t, a, "v6", "b", 3)
	wantErr(t, a.Assign("v6", ip("fd00::ffff:ffff:ffff:ffff"), "c"), nil, "")
	wantErr(t, a.Retain("v4", ip("10.0.0.3"), "a"), nil, "")
	recs := a.Records()
	if len(recs) != 9 || recs[0].Subnet != "v4" || recs[len(recs)-1].Addr != ip("fd00::ffff:ffff:ffff:ffff") {
		t.Fatalf("records not ordered by subnet and address: %v", recs)
	}
	b := rebuildAlloc(t)
	// Order of input does not matter.
	shuffled := slices.Clone(recs)
	slices.Reverse(shuffled)
	wantErr(t, b.Rebuild(shuffled), nil, "")
	if got := b.Records(); !slices.Equal(got, recs) {
		t.Fatalf("round trip: %v, want %v", got, recs)
	}
	for _, s := range []string{"v4", "v6"} {
		if x, y := stats(t, a, s), stats(t, b, s); x != y {
			t.Fatalf("stats of %s: %+v vs %+v", s, x, y)
		}
	}
	// Rebuild replaces: an empty rebuild frees everything.
	wantErr(t, b.Rebuild(nil), nil, "")
	if got := b.Records(); len(got) != 0 {
		t.Fatalf("records after empty rebuild: %v", got)
	}
}

func TestRebuildProblems(t *testing.T) {
	tests := []struct {
		name   string
		recs   []Record
		kind   error
		substr string
		keep   []Record // state afterwards
	}{
		{"same address, different owners",
			[]Record{{"v4", ip("10.0.0.5"), Allocated, "a"}, {"v4", ip("10.0.0.5"), Allocated, "b"}},
			ErrInUse, `subnet "v4": address 10.0.0.5 recorded twice, for "a" and for "b"; kept for "a"`,
			[]Record{{"v4", ip("10.0.0.5"), Allocated, "a"}}},
		{"same address, same owner",
			[]Record{{"v4", ip("10.0.0.5"), Retained, "a"}, {"v4", ip("10.0.0.5"), Allocated, "a"}},
			ErrInUse, `recorded twice, for "a" and for "a"`,
			[]Record{{"v4", ip("10.0.0.5"), Retained, "a"}}},
		{"unknown subnet",
			[]Record{{"v9", ip("10.0.0.5"), Allocated, "a"}},
			ErrUnknownSubnet, `subnet "v9": record of address 10.0.0.5 for "a": no such subnet`, nil},
		{"outside prefix",
			[]Record{{"v4", ip("10.0.1.5"), Allocated, "a"}, {"v4", ip("fd00::5"), Allocated, "b"}},
			ErrOutOfRange, `subnet "v4" (10.0.0.0/24): record of address 10.0.1.5 for "a": outside the prefix`, nil},
		{"invalid state kept as allocated",
			[]Record{{"v4", ip("10.0.0.5"), State(9), "a"}},
			ErrInvalidRequest, "invalid state State(9)",
			[]Record{{"v4", ip("10.0.0.5"), Allocated, "a"}}},
		{"empty owner kept occupied",
			[]Record{{"v4", ip("10.0.0.5"), Allocated, ""}},
			ErrInvalidRequest, "has no owner",
			[]Record{{"v4", ip("10.0.0.5"), Allocated, ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := rebuildAlloc(t)
			allocN(t, a, "v4", "old", 3) // replaced by the rebuild
			err := a.Rebuild(tc.recs)
			wantErr(t, err, tc.kind, tc.substr)
			var re *RebuildError
			if !errors.As(err, &re) || len(re.Problems) == 0 {
				t.Fatalf("not a *RebuildError: %T", err)
			}
			if got := a.Records(); !slices.Equal(got, tc.keep) {
				t.Fatalf("records %v, want %v", got, tc.keep)
			}
		})
	}
}

func TestRebuildErrorListsEveryProblem(t *testing.T) {
	a := rebuildAlloc(t)
	err := a.Rebuild([]Record{
		{"v4", ip("10.0.0.5"), Allocated, "a"},
		{"v4", ip("10.0.0.5"), Allocated, "b"},
		{"v4", ip("10.0.0.5"), Allocated, "c"},
		{"nope", ip("10.0.0.6"), Allocated, "d"},
	})
	var re *RebuildError
	if !errors.As(err, &re) || len(re.Problems) != 3 {
		t.Fatalf("problems: %v", err)
	}
	p := re.Problems[1]
	if p.Subnet != "v4" || p.Addr != ip("10.0.0.5") || p.Owner != "c" || p.Holder != "a" {
		t.Fatalf("problem fields %+v", p)
	}
	if !errors.Is(err, ErrInUse) || !errors.Is(err, ErrUnknownSubnet) || errors.Is(err, ErrOutOfRange) {
		t.Fatalf("errors.Is over problems is wrong: %v", err)
	}
}

func TestRebuildKeepsExcludedOccupied(t *testing.T) {
	a := rebuildAlloc(t)
	recs := []Record{
		{"v4", ip("10.0.0.1"), Allocated, "gw"},    // the gateway
		{"v4", ip("10.0.0.100"), Retained, "ex"},   // an excluded range
		{"v4", ip("10.0.0.0"), Allocated, "net"},   // the network address
		{"v4", ip("10.0.0.2"), Allocated, "plain"}, // normal
	}
	wantErr(t, a.Rebuild(recs), nil, "")
	st := stats(t, a, "v4")
	if want := (Stats{Total: 243, Used: 4, Retained: 1, Stranded: 3, Available: 242}); st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	// Nobody else gets them; the holder can still release them.
	wantErr(t, a.Assign("v4", ip("10.0.0.2"), "x"), ErrInUse, `allocated by "plain"`)
	wantErr(t, a.Release("v4", ip("10.0.0.100"), "ex"), nil, "")
	wantErr(t, a.Assign("v4", ip("10.0.0.100"), "ex"), ErrExcluded, "")
	if got := allocN(t, a, "v4", "o", 1)[0]; got != ip("10.0.0.3") {
		t.Fatalf("next-fit gave %s", got)
	}
}

func TestRebuildLeavesCursor(t *testing.T) {
	a := rebuildAlloc(t)
	wantErr(t, a.SetCursor("v4", ip("10.0.0.50")), nil, "")
	wantErr(t, a.Rebuild([]Record{{"v4", ip("10.0.0.51"), Allocated, "a"}}), nil, "")
	if got := allocN(t, a, "v4", "o", 1)[0]; got != ip("10.0.0.52") {
		t.Fatalf("next-fit after rebuild gave %s, want 10.0.0.52", got)
	}
}
