package ipam

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
)

// naiveAllocator is the comparison baseline: a map of addresses with a linear
// next-fit search, the simplest allocator one would write.
type naiveAllocator struct {
	prefix     netip.Prefix
	start, end netip.Addr
	cursor     netip.Addr
	held       map[netip.Addr]string
}

func newNaive(p netip.Prefix, start, end netip.Addr) *naiveAllocator {
	return &naiveAllocator{prefix: p, start: start, end: end, cursor: end, held: map[netip.Addr]string{}}
}

func (n *naiveAllocator) allocate(owner string) (netip.Addr, bool) {
	a := n.cursor
	for {
		a = a.Next()
		if !a.IsValid() || n.end.Less(a) {
			a = n.start
		}
		if _, used := n.held[a]; !used {
			n.held[a] = owner
			n.cursor = a
			return a, true
		}
		if a == n.cursor {
			return netip.Addr{}, false
		}
	}
}

func (n *naiveAllocator) release(a netip.Addr, owner string) bool {
	if n.held[a] != owner {
		return false
	}
	delete(n.held, a)
	return true
}

type benchSubnet struct {
	name   string
	prefix string
	fill   float64 // fraction of the window allocated before timing
}

var benchSubnets = []benchSubnet{
	{"v4-16", "10.0.0.0/16", 0},
	{"v6-64", "fd00::/64", 0},
	{"v4-16-full-1k-free", "10.0.0.0/16", -1},
}

// setupBench returns an allocator with the subnet "s", pre-filled as asked.
// It collects the heap before returning, so that garbage left by an earlier
// benchmark in the same process (the filled /16s are large) is not collected
// during the next one's timed loop.
func setupBench(b *testing.B, bs benchSubnet) (*Allocator, *naiveAllocator) {
	b.Helper()
	defer runtime.GC()
	p := netip.MustParsePrefix(bs.prefix)
	a := New()
	if err := a.AddSubnet(SubnetConfig{Name: "s", Network: "n", Prefix: p}); err != nil {
		b.Fatal(err)
	}
	if bs.fill >= 0 {
		return a, nil
	}
	// Fill the /16 completely, then free 1,000 scattered addresses: each next-fit
	// search crosses full chunks between the holes.
	cfg, _ := a.Subnet("s")
	lay, _ := newLayout(cfg)
	naive := newNaive(p, lay.addr(lay.start), lay.addr(lay.end))
	var addrs []netip.Addr
	for {
		ad, err := a.AllocateIn("s", "fill")
		if err != nil {
			break
		}
		naive.held[ad] = "fill"
		addrs = append(addrs, ad)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	for _, ad := range addrs[:1000] {
		_ = a.Release("s", ad, "fill")
		delete(naive.held, ad)
	}
	return a, naive
}

func reportPairs(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "pairs/s")
	}
}

// BenchmarkAllocateRelease measures allocate+release pairs on one subnet, from one
// goroutine and from 16 goroutines sharing the subnet.
func BenchmarkAllocateRelease(b *testing.B) {
	for _, bs := range benchSubnets {
		b.Run(bs.name+"/serial", func(b *testing.B) {
			a, _ := setupBench(b, bs)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ad, err := a.AllocateIn("s", "owner")
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Release("s", ad, "owner"); err != nil {
					b.Fatal(err)
				}
			}
			reportPairs(b)
		})
		b.Run(bs.name+"/parallel16", func(b *testing.B) {
			a, _ := setupBench(b, bs)
			var id atomic.Int64
			b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				owner := fmt.Sprintf("owner-%d", id.Add(1))
				for pb.Next() {
					ad, err := a.AllocateIn("s", owner)
					if err != nil {
						b.Error(err)
						return
					}
					if err := a.Release("s", ad, owner); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportPairs(b)
		})
	}
}

// BenchmarkNaiveAllocateRelease is the baseline for BenchmarkAllocateRelease.
func BenchmarkNaiveAllocateRelease(b *testing.B) {
	for _, bs := range benchSubnets {
		if bs.name == "v6-64" {
			continue
		}
		b.Run(bs.name+"/serial", func(b *testing.B) {
			_, naive := setupBench(b, bs)
			if naive == nil {
				p := netip.MustParsePrefix(bs.prefix)
				naive = newNaive(p, p.Addr().Next(), netip.MustParseAddr("10.0.255.254"))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ad, ok := naive.allocate("owner")
				if !ok || !naive.release(ad, "owner") {
					b.Fatal("naive allocator failed")
				}
			}
			reportPairs(b)
		})
	}
}

// BenchmarkNextFitNearlyFull measures one next-fit search in a subnet whose only
// free address is right behind the cursor, so the search crosses the whole
// window. Bits are set directly: owners do not matter to the search.
func BenchmarkNextFitNearlyFull(b *testing.B) {
	for _, p := range []string{"10.0.0.0/16", "10.0.0.0/8"} {
		b.Run(p, func(b *testing.B) {
			a := newWith(b, SubnetConfig{Name: "s", Network: "n", Prefix: pfx(p)})
			s, _ := a.subnet("s")
			l := s.lay
			for off := l.start; off <= l.end; off++ {
				s.h.bits.set(off)
			}
			hole := l.start + 12345
			s.h.bits.clear(hole)
			s.cursor = hole
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if off, ok := s.nextFit(); !ok || off != hole {
					b.Fatal("hole not found")
				}
			}
		})
	}
}

// rebuildRecords returns n records spread over a /12 and a /64, in random order.
func rebuildRecords(a *Allocator, n int) []Record {
	r := rand.New(rand.NewPCG(5, 6))
	seen := map[netip.Addr]bool{}
	recs := make([]Record, 0, n)
	v4, _ := a.subnet("v4")
	v6, _ := a.subnet("v6")
	for len(recs) < n {
		s, span := v4, uint64(1<<20-2)
		if len(recs)%5 >= 3 {
			s, span = v6, 1<<24
		}
		addr := s.lay.addr(1 + r.Uint64N(span))
		if seen[addr] {
			continue
		}
		seen[addr] = true
		recs = append(recs, Record{Subnet: s.name, Addr: addr, State: Allocated, Owner: fmt.Sprintf("pod-%d", len(recs))})
	}
	return recs
}

// BenchmarkRebuild measures Rebuild from 100,000 records.
func BenchmarkRebuild(b *testing.B) {
	a := newWith(b,
		SubnetConfig{Name: "v4", Network: "n", Prefix: pfx("10.0.0.0/12")},
		SubnetConfig{Name: "v6", Network: "n", Prefix: pfx("fd00::/64")},
	)
	recs := rebuildRecords(a, 100000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := a.Rebuild(recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/rebuild")
}

// BenchmarkMemory64 reports the heap held by a /64 with 10,000 addresses used,
// handed out by next-fit (the realistic case) and scattered at random over the
// whole prefix (the worst case: one chunk per address).
func BenchmarkMemory64(b *testing.B) {
	b.Run("next-fit", func(b *testing.B) {
		var d int64
		for range b.N {
			d = heapDelta(b, func() *Allocator { return slash64With(b, 10000) })
		}
		b.ReportMetric(float64(d), "B/10k")
	})
	b.Run("scattered", func(b *testing.B) {
		var d int64
		for range b.N {
			d = heapDelta(b, func() *Allocator { return scattered64(b, 10000) })
		}
		b.ReportMetric(float64(d), "B/10k")
	})
}

// BenchmarkAllocateReleaseSubnetPerGoroutine runs 16 goroutines, each on its own
// /16 of one allocator: with no allocator-wide lock they do not contend.
func BenchmarkAllocateReleaseSubnetPerGoroutine(b *testing.B) {
	a := New()
	for i := range 16 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)
		if err := a.AddSubnet(SubnetConfig{Name: fmt.Sprintf("s%d", i), Network: "n", Prefix: p}); err != nil {
			b.Fatal(err)
		}
	}
	var id atomic.Int64
	b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		n := id.Add(1) - 1
		subnet, owner := fmt.Sprintf("s%d", n%16), fmt.Sprintf("owner-%d", n)
		for pb.Next() {
			ad, err := a.AllocateIn(subnet, owner)
			if err != nil {
				b.Error(err)
				return
			}
			if err := a.Release(subnet, ad, owner); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportPairs(b)
}
