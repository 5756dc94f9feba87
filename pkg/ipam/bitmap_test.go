package ipam

import (
	"math/rand/v2"
	"testing"
)

// TestBitmapAgainstModel drives the bitmap with random sets and clears around
// chunk boundaries and the top of the 64-bit space, and compares every query with
// a plain set.
func TestBitmapAgainstModel(t *testing.T) {
	bases := []uint64{0, 1 << 20, ^uint64(0) - 3000}
	for _, base := range bases {
		r := rand.New(rand.NewPCG(base, 7))
		b := newBitmap(0)
		model := map[uint64]bool{}
		const span = 3000
		for i := range 20000 {
			off := base + r.Uint64N(span)
			if model[off] {
				b.clear(off)
				delete(model, off)
			} else {
				b.set(off)
				model[off] = true
			}
			if i%97 != 0 {
				continue
			}
			x := base + r.Uint64N(span)
			limit := x + r.Uint64N(base+span-x)
			want, wantOK := uint64(0), false
			for y := x; y <= limit; y++ {
				if !model[y] {
					want, wantOK = y, true
					break
				}
			}
			got, ok := b.firstClear(x, limit)
			if ok != wantOK || (ok && got != want) {
				t.Fatalf("base %d: firstClear(%d, %d) = %d, %v; want %d, %v", base, x, limit, got, ok, want, wantOK)
			}
			checkBitmapInvariants(t, &b, model)
		}
	}
}

func checkBitmapInvariants(t *testing.T, b *bitmap, model map[uint64]bool) {
	t.Helper()
	var n uint64
	for c, ch := range b.chunks {
		if ch.used == 0 && (ch != b.hot || c != b.hotIdx) {
			t.Fatalf("empty chunk %d kept that is not the hot one", c)
		}
		n += uint64(ch.used)
		full := b.full[c>>chunkShift]
		marked := full != nil && full.words[(c&chunkMask)>>6]&(1<<(c&63)) != 0
		if marked != (ch.used == chunkBits) {
			t.Fatalf("chunk %d used %d but full mark %v", c, ch.used, marked)
		}
	}
	if n != uint64(len(model)) {
		t.Fatalf("bitmap holds %d, model %d", n, len(model))
	}
	for off := range model {
		if !b.has(off) {
			t.Fatalf("offset %d missing", off)
		}
	}
}

func TestBitmapFullChunksAndSpare(t *testing.T) {
	b := newBitmap(0)
	// Fill chunks 0..2047 (several second-level entries) completely.
	for off := uint64(0); off < 2048*chunkBits; off++ {
		b.set(off)
	}
	if len(b.full) != 2048/chunkBits || b.full[0].used != chunkBits {
		t.Fatalf("second level: %d entries", len(b.full))
	}
	if _, ok := b.firstClear(0, 2048*chunkBits-1); ok {
		t.Fatal("found a clear bit in a full range")
	}
	if got, ok := b.firstClear(5, 2048*chunkBits); !ok || got != 2048*chunkBits {
		t.Fatalf("first clear after the full range: %d, %v", got, ok)
	}
	hole := uint64(1500*chunkBits + 17)
	b.clear(hole)
	if got, ok := b.firstClear(3, ^uint64(0)); !ok || got != hole {
		t.Fatalf("hole: %d, %v", got, ok)
	}
	// Emptying a chunk keeps it while hot, then recycles it as the spare.
	c := newBitmap(0)
	c.set(10)
	c.clear(10)
	if len(c.chunks) != 1 || c.spare != nil {
		t.Fatal("the hot chunk should stay while hot")
	}
	c.set(5 * chunkBits)
	if len(c.chunks) != 1 || c.spare == nil {
		t.Fatalf("emptied chunk not recycled: %d chunks, spare %v", len(c.chunks), c.spare != nil)
	}
}

func TestBitmapChunkMapShrinks(t *testing.T) {
	b := newBitmap(0)
	model := map[uint64]bool{}
	const n = 3 * shrinkMin
	for i := range uint64(n) {
		off := i*chunkBits*3 + i%chunkBits // one address per chunk, spread out
		b.set(off)
		model[off] = true
	}
	if b.peak != n {
		t.Fatalf("peak %d, want %d", b.peak, n)
	}
	for off := range model {
		if len(model) == 10 {
			break
		}
		b.clear(off)
		delete(model, off)
	}
	if b.peak >= shrinkMin || len(b.chunks) > 11 {
		t.Fatalf("chunk map not compacted: %d chunks, peak %d", len(b.chunks), b.peak)
	}
	checkBitmapInvariants(t, &b, model)
}
