package ipam

import (
	"errors"
	"slices"
	"testing"
)

func TestTransfer(t *testing.T) {
	const s = "s"
	tests := []struct {
		name   string
		op     func(a *Allocator) error
		kind   error
		substr string
		want   []Record // state afterwards; nil: unchanged
	}{
		{"allocated to another owner, retained", func(a *Allocator) error { return a.Transfer(s, ip("10.0.0.1"), "a", "g", Retained) }, nil, "",
			[]Record{{s, ip("10.0.0.1"), Retained, "g"}, {s, ip("10.0.0.2"), Retained, "a"}}},
		{"retained to another owner, allocated", func(a *Allocator) error { return a.Transfer(s, ip("10.0.0.2"), "a", "p", Allocated) }, nil, "",
			[]Record{{s, ip("10.0.0.1"), Allocated, "a"}, {s, ip("10.0.0.2"), Allocated, "p"}}},
		{"from someone who does not hold it", func(a *Allocator) error { return a.Transfer(s, ip("10.0.0.1"), "b", "c", Allocated) }, ErrInUse,
			`address 10.0.0.1 is allocated by "a" (requested by "b")`, nil},
		{"a free address", func(a *Allocator) error { return a.Transfer(s, ip("10.0.0.3"), "a", "c", Allocated) }, ErrNotAllocated, "not allocated", nil},
		{"to no owner", func(a *Allocator) error { return a.Transfer(s, ip("10.0.0.1"), "a", "", Allocated) }, ErrInvalidRequest, "", nil},
		{"to an unknown state", func(a *Allocator) error { return a.Transfer(s, ip("10.0.0.1"), "a", "b", State(9)) }, ErrInvalidRequest, "cannot transfer", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newWith(t, SubnetConfig{Name: s, Network: "n", Prefix: pfx("10.0.0.0/29")})
			allocN(t, a, s, "a", 2)
			wantErr(t, a.Retain(s, ip("10.0.0.2"), "a"), nil, "")
			before, st := a.Records(), stats(t, a, s)
			wantErr(t, tc.op(a), tc.kind, tc.substr)
			want := tc.want
			if want == nil {
				want = before
			}
			if got := a.Records(); !slices.Equal(got, want) {
				t.Fatalf("records %v, want %v", got, want)
			}
			retained := 0
			for _, r := range want {
				if r.State == Retained {
					retained++
				}
			}
			after := stats(t, a, s)
			if after.Used != st.Used || after.Retained != uint64(retained) {
				t.Fatalf("stats %+v, want used %d retained %d", after, st.Used, retained)
			}
		})
	}
}

func TestCheckAddr(t *testing.T) {
	cfg := SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.1"),
		Start: ip("10.0.0.1"), End: ip("10.0.0.200"), Excluded: []Range{rng(t, "10.0.0.50-10.0.0.59")}, Reserved: []Range{rng(t, "10.0.0.9")}}
	for _, tc := range []struct {
		addr   string
		kind   error
		substr string
	}{
		{"10.0.0.7", nil, ""},
		{"10.0.0.9", nil, ""}, // reserved: assignable on request
		{"10.0.0.0", ErrExcluded, "network address"},
		{"10.0.0.1", ErrExcluded, "gateway"},
		{"10.0.0.55", ErrExcluded, "excluded range"},
		{"10.0.0.201", ErrOutOfRange, "outside the allocatable range"},
		{"10.0.1.7", ErrOutOfRange, "outside 10.0.0.0/24"},
		{"fd00::7", ErrOutOfRange, "outside 10.0.0.0/24"},
	} {
		wantErr(t, CheckAddr(cfg, ip(tc.addr)), tc.kind, tc.substr)
	}
	wantErr(t, CheckAddr(SubnetConfig{Name: "bad", Network: "n", Prefix: pfx("fd00::/48")}, ip("fd00::1")), ErrInvalidConfig, "")
}

// A Checker answers as CheckAddr for every address, and tells reserved
// addresses apart: only assignable ones, not those excluded or outside the
// window.
func TestCheckerReserved(t *testing.T) {
	cfg := SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.1"), End: ip("10.0.0.200"),
		Excluded: []Range{rng(t, "10.0.0.50-10.0.0.59")}, Reserved: []Range{rng(t, "10.0.0.9"), rng(t, "10.0.0.55-10.0.0.60"), rng(t, "10.0.0.210")}}
	c, err := NewChecker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr     string
		reserved bool
	}{{"10.0.0.9", true}, {"10.0.0.60", true}, {"10.0.0.55", false}, {"10.0.0.210", false}, {"10.0.0.7", false}, {"fd00::9", false}} {
		if got := c.Reserved(ip(tc.addr)); got != tc.reserved {
			t.Errorf("Reserved(%s) = %v, want %v", tc.addr, got, tc.reserved)
		}
		want, got := CheckAddr(cfg, ip(tc.addr)), c.Check(ip(tc.addr))
		if (want == nil) != (got == nil) || want != nil && want.Error() != got.Error() {
			t.Errorf("Check(%s) = %v, CheckAddr = %v", tc.addr, got, want)
		}
	}
	if _, err := NewChecker(SubnetConfig{Name: "bad", Network: "n", Prefix: pfx("fd00::/48")}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewChecker of a /48: %v, want ErrInvalidConfig", err)
	}
}
