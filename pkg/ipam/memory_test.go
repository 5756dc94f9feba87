package ipam

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
)

// heapDelta returns how many bytes of heap the allocator built by build keeps
// alive, measured as the HeapAlloc delta across garbage collections.
func heapDelta(t testing.TB, build func() *Allocator) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	a := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(a)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// slash64With returns an allocator with a /64 holding n addresses handed out by
// next-fit.
func slash64With(t testing.TB, n int) *Allocator {
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("fd00::/64")})
	allocN(t, a, "s", "pod", n)
	return a
}

func TestMemoryIsProportionalToUse(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name  string
		build func() *Allocator
		limit int64
	}{
		{"empty /64", func() *Allocator { return slash64With(t, 0) }, 16 << 10},
		{"empty /8", func() *Allocator {
			return newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/8")})
		}, 16 << 10},
		{"/64 with 10,000 used", func() *Allocator { return slash64With(t, 10000) }, 2 * mib},
		{"/64 with 10,000 scattered", func() *Allocator { return scattered64(t, 10000) }, 2 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := heapDelta(t, tc.build)
			t.Logf("%s: %d bytes", tc.name, d)
			if d > tc.limit {
				t.Fatalf("%s costs %d bytes, limit %d", tc.name, d, tc.limit)
			}
		})
	}
}

// scattered64 returns an allocator with a /64 holding n addresses spread at
// random over the prefix (one chunk each): the worst case for the bitmap.
func scattered64(t testing.TB, n int) *Allocator {
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("fd00::/64")})
	sub, _ := a.subnet("s")
	r := rand.New(rand.NewPCG(3, 4))
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Subnet: "s", Addr: sub.lay.addr(1 + r.Uint64N(1<<63)), State: Allocated, Owner: "pod"}
	}
	if err := a.Rebuild(recs); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestMemoryShrinksAfterPeak(t *testing.T) {
	a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx("10.0.0.0/12")})
	var held []netip.Addr
	grown := heapDelta(t, func() *Allocator {
		held = allocN(t, a, "s", "pod", 200000)
		return a
	})
	shrunk := heapDelta(t, func() *Allocator {
		for _, ad := range held[:len(held)-100] {
			if err := a.Release("s", ad, "pod"); err != nil {
				t.Fatal(err)
			}
		}
		held = held[len(held)-100:]
		return a
	})
	t.Logf("200,000 held: %+d bytes; after releasing all but 100: %+d bytes", grown, shrunk)
	if -shrunk < grown*3/4 {
		t.Fatalf("releasing 99.95%% of the addresses gave back %d of %d bytes", -shrunk, grown)
	}
	sub, _ := a.subnet("s")
	if n := len(sub.h.owners); n != 100 || sub.h.peak >= shrinkMin {
		t.Fatalf("owners %d, peak %d: map not compacted", n, sub.h.peak)
	}
}
