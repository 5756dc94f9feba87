package ipam

import "math/bits"

// Sparse bitmap of held offsets. See the design note in subnet.go.

const (
	chunkShift = 9
	chunkBits  = 1 << chunkShift // offsets per chunk
	chunkMask  = chunkBits - 1
	chunkWords = chunkBits / 64
	maxChunk   = ^uint64(0) >> chunkShift // largest chunk index
)

// chunk holds the bits of chunkBits consecutive offsets.
type chunk struct {
	words [chunkWords]uint64
	used  uint32
}

// firstClear returns the first clear bit at or after i.
func (c *chunk) firstClear(i uint) (uint, bool) {
	w := i >> 6
	m := ^c.words[w] & (^uint64(0) << (i & 63))
	for {
		if m != 0 {
			return w<<6 | uint(bits.TrailingZeros64(m)), true
		}
		w++
		if w == chunkWords {
			return 0, false
		}
		m = ^c.words[w]
	}
}

// bitmap is a set of offsets. A chunk exists only while one of its offsets is set
// (plus at most one empty chunk: the hot one). Full chunks are also marked in a
// second level so a search skips a run of 2^18 held offsets in one step.
type bitmap struct {
	chunks map[uint64]*chunk
	full   map[uint64]*chunk // second level: bit i of full[s] is set if chunk s<<chunkShift|i is full
	hot    *chunk            // the chunk last written, nil if none
	hotIdx uint64
	spare  *chunk // a zeroed chunk kept to avoid allocating on churn
	peak   int    // largest len(chunks) since chunks was last rebuilt
}

func newBitmap(sizeHint int) bitmap {
	return bitmap{chunks: make(map[uint64]*chunk, sizeHint)}
}

// peek returns chunk c or nil, without changing the hot chunk.
func (b *bitmap) peek(c uint64) *chunk {
	if b.hot != nil && c == b.hotIdx {
		return b.hot
	}
	return b.chunks[c]
}

// touch makes chunk c (which must exist or be created by the caller) the hot one.
// The previous hot chunk is dropped if it has become empty.
func (b *bitmap) touch(c uint64, ch *chunk) {
	if old := b.hot; old != nil && old.used == 0 && b.hotIdx != c {
		delete(b.chunks, b.hotIdx)
		if b.spare == nil {
			b.spare = old
		}
		if shrinkDue(len(b.chunks), b.peak) {
			b.chunks = copyMap(b.chunks)
			b.peak = len(b.chunks)
		}
	}
	b.hot, b.hotIdx = ch, c
}

// set marks off as held. off must not be held.
func (b *bitmap) set(off uint64) {
	c := off >> chunkShift
	ch := b.hot
	if ch == nil || c != b.hotIdx {
		ch = b.chunks[c]
		if ch == nil {
			ch = b.spare
			b.spare = nil
			if ch == nil {
				ch = new(chunk)
			}
			b.chunks[c] = ch
			b.peak = max(b.peak, len(b.chunks))
		}
		b.touch(c, ch)
	}
	ch.words[off>>6&(chunkWords-1)] |= 1 << (off & 63)
	ch.used++
	if ch.used == chunkBits {
		b.markFull(c, true)
	}
}

// clear marks off as free. off must be held.
func (b *bitmap) clear(off uint64) {
	c := off >> chunkShift
	ch := b.hot
	if ch == nil || c != b.hotIdx {
		ch = b.chunks[c]
		b.touch(c, ch)
	}
	if ch.used == chunkBits {
		b.markFull(c, false)
	}
	ch.words[off>>6&(chunkWords-1)] &^= 1 << (off & 63)
	ch.used--
}

// has reports whether off is held.
func (b *bitmap) has(off uint64) bool {
	ch := b.peek(off >> chunkShift)
	return ch != nil && ch.words[off>>6&(chunkWords-1)]&(1<<(off&63)) != 0
}

func (b *bitmap) markFull(c uint64, full bool) {
	if b.full == nil {
		b.full = make(map[uint64]*chunk)
	}
	sc, i := c>>chunkShift, c&chunkMask
	m := b.full[sc]
	if full {
		if m == nil {
			m = new(chunk)
			b.full[sc] = m
		}
		m.words[i>>6] |= 1 << (i & 63)
		m.used++
		return
	}
	m.words[i>>6] &^= 1 << (i & 63)
	m.used--
	if m.used == 0 {
		delete(b.full, sc)
	}
}

// nextNotFull returns the first chunk index in [c, lc] that is not full.
func (b *bitmap) nextNotFull(c, lc uint64) (uint64, bool) {
	for c <= lc {
		sc := c >> chunkShift
		m := b.full[sc]
		if m == nil {
			return c, true
		}
		if i, ok := m.firstClear(uint(c & chunkMask)); ok {
			c = sc<<chunkShift | uint64(i)
			return c, c <= lc
		}
		if sc == maxChunk>>chunkShift {
			return 0, false
		}
		c = (sc + 1) << chunkShift
	}
	return 0, false
}

// firstClear returns the first offset in [x, limit] that is not held.
func (b *bitmap) firstClear(x, limit uint64) (uint64, bool) {
	lc := limit >> chunkShift
	for {
		c := x >> chunkShift
		ch := b.peek(c)
		if ch == nil {
			return x, true
		}
		if ch.used < chunkBits {
			if i, ok := ch.firstClear(uint(x & chunkMask)); ok {
				y := c<<chunkShift | uint64(i)
				return y, y <= limit
			}
		}
		if c >= lc {
			return 0, false
		}
		next, ok := b.nextNotFull(c+1, lc)
		if !ok {
			return 0, false
		}
		x = next << chunkShift
	}
}
