package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }
func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func rng(t testing.TB, s string) Range {
	t.Helper()
	r, err := ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newWith(t testing.TB, cfgs ...SubnetConfig) *Allocator {
	t.Helper()
	a := New()
	for _, c := range cfgs {
		if err := a.AddSubnet(c); err != nil {
			t.Fatalf("AddSubnet(%s): %v", c.Name, err)
		}
	}
	return a
}

// wantErr fails unless err matches kind (nil kind: no error). If substr is set the
// message must contain it.
func wantErr(t testing.TB, err, kind error, substr string) {
	t.Helper()
	switch {
	case kind == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case kind == nil:
		return
	case !errors.Is(err, kind):
		t.Fatalf("error %v, want kind %v", err, kind)
	case substr != "" && !strings.Contains(err.Error(), substr):
		t.Fatalf("error %q does not contain %q", err, substr)
	}
}

func allocN(t testing.TB, a *Allocator, subnet, owner string, n int) []netip.Addr {
	t.Helper()
	out := make([]netip.Addr, 0, n)
	for range n {
		ad, err := a.AllocateIn(subnet, owner)
		if err != nil {
			t.Fatalf("AllocateIn(%s) after %d: %v", subnet, len(out), err)
		}
		out = append(out, ad)
	}
	return out
}

func stats(t testing.TB, a *Allocator, subnet string) Stats {
	t.Helper()
	st, err := a.Stats(subnet)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
