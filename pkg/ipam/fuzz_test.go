package ipam

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

// The fuzz model is deliberately naive: it works on netip.Addr values and
// enumerates small windows, sharing no code with the allocator.

type fzSubnet struct {
	cfg        SubnetConfig
	inPrefix   []netip.Addr // prefix addresses the fuzzer picks from, ascending
	pick       []netip.Addr // inPrefix plus neighbours outside the prefix
	window     []netip.Addr // [start, end]
	network    netip.Addr
	broadcast  netip.Addr // invalid for IPv6
	start, end netip.Addr
	cursor     netip.Addr
	held       map[netip.Addr]Record
}

func fzRange(t testing.TB, s string) []Range { return []Range{rng(t, s)} }

// fzConfigs are the subnets of the fuzzed allocator, all in network "n".
func fzConfigs(t testing.TB) []SubnetConfig {
	return []SubnetConfig{
		{Name: "a4", Prefix: pfx("10.0.0.0/27"), Gateway: ip("10.0.0.1"),
			Reserved: fzRange(t, "10.0.0.5-10.0.0.7"), Excluded: fzRange(t, "10.0.0.20-10.0.0.22")},
		{Name: "b4", Prefix: pfx("10.0.1.0/28"), Start: ip("10.0.1.3"), End: ip("10.0.1.12"), Gateway: ip("10.0.1.14")},
		{Name: "c4", Prefix: pfx("10.0.2.0/29"), Private: true},
		{Name: "a6", Prefix: pfx("fd00::/122"), Gateway: ip("fd00::1"),
			Reserved: fzRange(t, "fd00::8-fd00::a"), Excluded: fzRange(t, "fd00::30-fd00::33")},
		{Name: "b6", Prefix: pfx("fd00:1::/64"), Start: ip("fd00:1::ffff:ffff:ffff:ffc0"),
			Gateway: ip("fd00:1::ffff:ffff:ffff:ffc5"), Excluded: fzRange(t, "fd00:1::ffff:ffff:ffff:fff0")},
	}
}

func newFzSubnet(cfg SubnetConfig) *fzSubnet {
	s := &fzSubnet{cfg: cfg, network: cfg.Prefix.Addr(), held: map[netip.Addr]Record{}}
	var last netip.Addr
	if cfg.Prefix.Bits() == 64 { // enumerate only the top of the /64 and its bottom
		last = ip("fd00:1::ffff:ffff:ffff:ffff")
		s.inPrefix = []netip.Addr{s.network, s.network.Next()}
		for a := cfg.Start.Prev().Prev(); cfg.Prefix.Contains(a); a = a.Next() {
			s.inPrefix = append(s.inPrefix, a)
		}
	} else {
		for a := s.network; cfg.Prefix.Contains(a); a = a.Next() {
			s.inPrefix = append(s.inPrefix, a)
			last = a
		}
	}
	s.start, s.end = s.network.Next(), last
	if cfg.Prefix.Addr().Is4() {
		s.broadcast, s.end = last, last.Prev()
	}
	if cfg.Start.IsValid() {
		s.start = cfg.Start
	}
	if cfg.End.IsValid() {
		s.end = cfg.End
	}
	for _, a := range s.inPrefix {
		if !a.Less(s.start) && !s.end.Less(a) {
			s.window = append(s.window, a)
		}
	}
	s.pick = append([]netip.Addr{s.network.Prev()}, s.inPrefix...)
	s.pick = append(s.pick, last.Next())
	s.cursor = s.end
	return s
}

func inRanges(rs []Range, a netip.Addr) bool {
	return slices.ContainsFunc(rs, func(r Range) bool { return r.Contains(a) })
}

// refusal is the error kind an explicit Assign of a gets before ownership is
// considered, or nil.
func (s *fzSubnet) refusal(a netip.Addr) error {
	switch {
	case !s.cfg.Prefix.Contains(a):
		return ErrOutOfRange
	case a == s.network || a == s.broadcast || a == s.cfg.Gateway:
		return ErrExcluded
	case a.Less(s.start) || s.end.Less(a):
		return ErrOutOfRange
	case inRanges(s.cfg.Excluded, a):
		return ErrExcluded
	}
	return nil
}

func (s *fzSubnet) allocatable(a netip.Addr) bool { return s.refusal(a) == nil }

func (s *fzSubnet) nextFit() (netip.Addr, bool) {
	after := slices.IndexFunc(s.window, func(a netip.Addr) bool { return s.cursor.Less(a) })
	if after < 0 {
		after = len(s.window)
	}
	order := append(slices.Clone(s.window[after:]), s.window[:after]...)
	for _, a := range order {
		if _, held := s.held[a]; !held && s.allocatable(a) && !inRanges(s.cfg.Reserved, a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (s *fzSubnet) stats() Stats {
	var st Stats
	for _, a := range s.window {
		if !s.allocatable(a) {
			continue
		}
		st.Total++
		_, held := s.held[a]
		if inRanges(s.cfg.Reserved, a) {
			st.Reserved++
		} else if !held {
			st.Available++
		}
	}
	for a, r := range s.held {
		st.Used++
		if r.State == Retained {
			st.Retained++
		}
		if !s.allocatable(a) {
			st.Stranded++
		}
	}
	return st
}

type fzModel struct {
	subnets []*fzSubnet // by name
}

func (m *fzModel) records() []Record {
	var out []Record
	for _, s := range m.subnets {
		var rs []Record
		for _, r := range s.held {
			rs = append(rs, r)
		}
		slices.SortFunc(rs, func(x, y Record) int { return x.Addr.Compare(y.Addr) })
		out = append(out, rs...)
	}
	return out
}

// fzReader hands out fuzz bytes, zeros once they run out.
type fzReader struct{ b []byte }

func (r *fzReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return int(v)
}

var fzOwners = []string{"o0", "o1", "o2"}

// fzHarness runs the allocator and the model side by side.
type fzHarness struct {
	t     *testing.T
	a     *Allocator
	m     *fzModel
	trace []string
}

func (h *fzHarness) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("%s\nafter steps:\n%v", fmt.Sprintf(format, args...), h.trace)
}

func (h *fzHarness) checkKind(op string, err, want error) {
	h.t.Helper()
	if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
		h.fail("%s: error %v, want kind %v", op, err, want)
	}
}

// step decodes one operation: a byte whose low 3 bits pick the operation and
// whose high 5 bits pick the subnet and the owner, followed by an address byte
// for Assign, Release, Retain and SetCursor, a request byte for Allocate, and
// range bytes for UpdateSubnet.
func (h *fzHarness) step(r *fzReader) {
	b := r.next()
	op, sel := b&7, b>>3
	s := h.m.subnets[sel%len(h.m.subnets)]
	owner := fzOwners[sel/len(h.m.subnets)%len(fzOwners)]
	var addr netip.Addr
	switch op {
	case 2, 3, 4, 7:
		addr = s.pick[r.next()%len(s.pick)]
	}
	switch op {
	case 0, 1:
		h.allocateIn(s, owner)
	case 2:
		h.assign(s, addr, owner)
	case 3:
		h.release(s, addr, owner)
	case 4:
		h.retain(s, addr, owner)
	case 5:
		h.update(s, r)
	case 6:
		h.allocate(sel, r.next(), owner)
	case 7:
		h.trace = append(h.trace, fmt.Sprintf("SetCursor(%s,%s)", s.cfg.Name, addr))
		err := h.a.SetCursor(s.cfg.Name, addr)
		if s.cfg.Prefix.Contains(addr) {
			s.cursor = addr
			h.checkKind("SetCursor", err, nil)
		} else {
			h.checkKind("SetCursor", err, ErrOutOfRange)
		}
	}
	if addr.IsValid() {
		h.checkAddr(s, addr)
	}
	if op == 6 || len(h.trace)%8 == 0 { // network-wide steps may touch any subnet
		h.check(true)
	} else {
		h.checkSubnet(s)
	}
}

// checkAddr compares what the allocator and the model know about one address.
func (h *fzHarness) checkAddr(s *fzSubnet, addr netip.Addr) {
	h.t.Helper()
	got, err := h.a.Lookup(s.cfg.Name, addr)
	want, held := s.held[addr]
	if (err == nil) != held || (held && got != want) {
		h.fail("Lookup(%s, %s) = %+v, %v; model %+v, %v", s.cfg.Name, addr, got, err, want, held)
	}
}

func (h *fzHarness) allocateIn(s *fzSubnet, owner string) {
	h.trace = append(h.trace, fmt.Sprintf("AllocateIn(%s,%s)", s.cfg.Name, owner))
	got, err := h.a.AllocateIn(s.cfg.Name, owner)
	want, ok := s.nextFit()
	if !ok {
		h.checkKind("AllocateIn", err, ErrExhausted)
		return
	}
	if err != nil || got != want {
		h.fail("AllocateIn(%s) = %v, %v; model %v", s.cfg.Name, got, err, want)
	}
	if _, dup := s.held[got]; dup || !s.allocatable(got) {
		h.fail("AllocateIn handed out %s: held or never allocatable", got)
	}
	s.held[got] = Record{s.cfg.Name, got, Allocated, owner}
	s.cursor = got
}

func (h *fzHarness) assign(s *fzSubnet, addr netip.Addr, owner string) {
	h.trace = append(h.trace, fmt.Sprintf("Assign(%s,%s,%s)", s.cfg.Name, addr, owner))
	err := h.a.Assign(s.cfg.Name, addr, owner)
	want := s.refusal(addr)
	if r, held := s.held[addr]; want == nil && held && r.Owner != owner {
		want = ErrInUse
	}
	h.checkKind("Assign", err, want)
	if want == nil {
		s.held[addr] = Record{s.cfg.Name, addr, Allocated, owner}
	}
}

// ownerCheck is the error kind Release and Retain get, or nil.
func (s *fzSubnet) ownerCheck(addr netip.Addr, owner string) error {
	r, held := s.held[addr]
	switch {
	case !s.cfg.Prefix.Contains(addr):
		return ErrOutOfRange
	case !held:
		return ErrNotAllocated
	case r.Owner != owner:
		return ErrInUse
	}
	return nil
}

func (h *fzHarness) release(s *fzSubnet, addr netip.Addr, owner string) {
	h.trace = append(h.trace, fmt.Sprintf("Release(%s,%s,%s)", s.cfg.Name, addr, owner))
	want := s.ownerCheck(addr, owner)
	h.checkKind("Release", h.a.Release(s.cfg.Name, addr, owner), want)
	if want == nil {
		delete(s.held, addr)
	}
}

func (h *fzHarness) retain(s *fzSubnet, addr netip.Addr, owner string) {
	h.trace = append(h.trace, fmt.Sprintf("Retain(%s,%s,%s)", s.cfg.Name, addr, owner))
	want := s.ownerCheck(addr, owner)
	h.checkKind("Retain", h.a.Retain(s.cfg.Name, addr, owner), want)
	if want == nil {
		s.held[addr] = Record{s.cfg.Name, addr, Retained, owner}
	}
}

// fzPickRanges decodes zero, one or two ranges of prefix addresses.
func fzPickRanges(s *fzSubnet, r *fzReader) []Range {
	var out []Range
	for range r.next() % 3 {
		i := r.next() % len(s.inPrefix)
		j := min(i+r.next()%6, len(s.inPrefix)-1)
		out = append(out, Range{First: s.inPrefix[i], Last: s.inPrefix[j]})
	}
	return out
}

func (h *fzHarness) update(s *fzSubnet, r *fzReader) {
	cfg := s.cfg.clone()
	cfg.Reserved = fzPickRanges(s, r)
	cfg.Excluded = fzPickRanges(s, r)
	h.trace = append(h.trace, fmt.Sprintf("Update(%s,res=%v,exc=%v)", cfg.Name, cfg.Reserved, cfg.Excluded))
	h.checkKind("UpdateSubnet", h.a.UpdateSubnet(cfg), nil)
	s.cfg = cfg
}

var fzFamilies = [][]family.Family{{family.IPv4}, {family.IPv6}, {family.IPv4, family.IPv6}, {family.IPv6, family.IPv4}}

func (h *fzHarness) allocate(x, y int, owner string) {
	req := Request{Owner: owner, Network: "n", Families: fzFamilies[x%4]}
	if x/4%2 == 1 { // list subnets per family, private ones included: one to all, in varied orders
		req.Subnets = map[family.Family][]string{}
		for i, f := range req.Families {
			var names []string
			for _, s := range h.m.subnets {
				if family.Of(s.cfg.Prefix.Addr()) == f {
					names = append(names, s.cfg.Name)
				}
			}
			first, n := (y+i)%len(names), 1+(y/4+i)%len(names)
			list := make([]string, 0, n)
			for k := range n {
				list = append(list, names[(first+k)%len(names)])
			}
			if y/16%2 == 1 {
				slices.Reverse(list)
			}
			req.Subnets[f] = list
		}
	}
	h.trace = append(h.trace, fmt.Sprintf("Allocate(%v,%v,%s)", req.Families, req.Subnets, owner))
	leases, err := h.a.Allocate(req)
	want, ok := h.modelAllocate(req)
	if !ok {
		h.checkKind("Allocate", err, ErrExhausted)
		return
	}
	if err != nil || len(leases) != len(want) {
		h.fail("Allocate = %v, %v; model %v", leases, err, want)
	}
	for i, l := range leases {
		if l.Subnet != want[i].Subnet || l.Addr != want[i].Addr || l.Family != req.Families[i] {
			h.fail("Allocate lease %d = %+v; model %v", i, l, want[i])
		}
	}
}

// modelAllocate applies req to the model, all or nothing.
func (h *fzHarness) modelAllocate(req Request) ([]Record, bool) {
	var done []Record
	undo := func() {
		for _, r := range done {
			s := h.m.subnet(r.Subnet)
			delete(s.held, r.Addr)
		}
	}
	cursors := make([]netip.Addr, len(h.m.subnets))
	for i, s := range h.m.subnets {
		cursors[i] = s.cursor
	}
	for _, f := range req.Families {
		found := false
		for _, s := range h.m.candidates(req, f) {
			if a, ok := s.nextFit(); ok {
				r := Record{s.cfg.Name, a, Allocated, req.Owner}
				s.held[a], s.cursor = r, a
				done = append(done, r)
				found = true
				break
			}
		}
		if !found {
			undo()
			for i, s := range h.m.subnets {
				s.cursor = cursors[i]
			}
			return nil, false
		}
	}
	return done, true
}

// candidates are the subnets a request tries for family f, in order: the
// listed ones as listed, else the non-private ones of the family by name.
func (m *fzModel) candidates(req Request, f family.Family) []*fzSubnet {
	var out []*fzSubnet
	if names := req.Subnets[f]; len(names) > 0 {
		for _, name := range names {
			out = append(out, m.subnet(name))
		}
		return out
	}
	for _, s := range m.subnets {
		if family.Of(s.cfg.Prefix.Addr()) == f && !s.cfg.Private {
			out = append(out, s)
		}
	}
	return out
}

func (m *fzModel) subnet(name string) *fzSubnet {
	for _, s := range m.subnets {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// check compares statistics, cursors and, if all is set, records of every
// subnet with the model. Steps call it every 8 steps and after network-wide
// allocations, and checkSubnet otherwise: together with the exact check of every
// address handed out and checkAddr this catches any divergence at the step that
// causes it, while keeping each run (and so minimisation) fast.
func (h *fzHarness) check(all bool) {
	h.t.Helper()
	if all {
		if got, want := h.a.Records(), h.m.records(); !slices.Equal(got, want) {
			h.fail("records %v, model %v", got, want)
		}
	}
	for _, s := range h.m.subnets {
		h.checkSubnet(s)
	}
}

// checkSubnet compares the statistics and the cursor of one subnet.
func (h *fzHarness) checkSubnet(s *fzSubnet) {
	h.t.Helper()
	st, err := h.a.Stats(s.cfg.Name)
	if want := s.stats(); err != nil || st != want {
		h.fail("stats of %s: %+v, %v; model %+v", s.cfg.Name, st, err, want)
	}
	if c, _ := h.a.Cursor(s.cfg.Name); c != s.cursor {
		h.fail("cursor of %s: %s, model %s", s.cfg.Name, c, s.cursor)
	}
}

// checkRebuild rebuilds a fresh allocator from the records and compares.
func (h *fzHarness) checkRebuild() {
	fresh := New()
	for _, s := range h.m.subnets {
		if err := fresh.AddSubnet(s.cfg); err != nil {
			h.fail("AddSubnet: %v", err)
		}
	}
	recs := h.a.Records()
	if err := fresh.Rebuild(recs); err != nil {
		h.fail("Rebuild(Records()): %v", err)
	}
	if got := fresh.Records(); !slices.Equal(got, recs) {
		h.fail("rebuilt records %v, want %v", got, recs)
	}
	for _, s := range h.m.subnets {
		x, _ := h.a.Stats(s.cfg.Name)
		y, _ := fresh.Stats(s.cfg.Name)
		if x != y {
			h.fail("stats of %s after rebuild %+v, want %+v", s.cfg.Name, y, x)
		}
	}
}

func FuzzOperations(f *testing.F) {
	alloc := func(subnet, owner int) byte { return byte((owner*5 + subnet) << 3) }
	f.Add(bytes.Repeat([]byte{alloc(0, 0)}, 40)) // exhaust a4 and keep asking
	f.Add([]byte{6, 2, 6 | 1<<3, 3, 6 | 2<<3, 8, 6 | 3<<3, 12, 6, 0, 6, 0, 6, 0, 6, 0, 6, 0})
	// dual-stack requests listing several subnets per family, until the lists are full
	f.Add(append(bytes.Repeat([]byte{6 | 6<<3, 255, 6 | 7<<3, 4}, 30), alloc(0, 0), 3, 2))
	f.Add([]byte{alloc(1, 0), alloc(1, 0), 3 | 1<<3, 2, alloc(1, 1), 7 | 1<<3, 1, alloc(1, 2), 4 | 1<<3, 5, 2 | 6<<3, 5})
	f.Add([]byte{5 | 3<<3, 1, 40, 3, 2, 60, 2, alloc(3, 0), alloc(3, 0), alloc(3, 0), 7 | 3<<3, 65, alloc(3, 1), alloc(3, 1)})
	f.Add([]byte{5 | 2<<3, 2, 1, 4, 9, 1, 2, 2, alloc(2, 0), alloc(2, 0), 2 | 7<<3, 1, alloc(2, 2), 3 | 2<<3, 3})
	r := rand.New(rand.NewPCG(11, 12))
	for range 3 {
		b := make([]byte, 128)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// 160 bytes (about 100 steps) fill and wrap the subnets several times;
		// longer inputs only slow down execution and minimisation.
		if len(data) > 160 {
			data = data[:160]
		}
		h := &fzHarness{t: t, a: New(), m: &fzModel{}}
		for _, cfg := range fzConfigs(t) {
			cfg.Network = "n"
			if err := h.a.AddSubnet(cfg); err != nil {
				t.Fatal(err)
			}
			h.m.subnets = append(h.m.subnets, newFzSubnet(cfg))
		}
		slices.SortFunc(h.m.subnets, func(x, y *fzSubnet) int { return strings.Compare(x.cfg.Name, y.cfg.Name) })
		rd := &fzReader{b: data}
		for len(rd.b) > 0 {
			h.step(rd)
		}
		h.check(true)
		h.checkRebuild()
	})
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "10.0.0.1-10.0.0.9", "fd00::1-fd00::ff", "10.0.0.9-10.0.0.1",
		"10.0.0.1-fd00::1", "::ffff:10.0.0.1-::ffff:10.0.0.2", "fe80::1%eth0", "-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error of wrong kind: %v", err)
			}
			return
		}
		if r.Last.Less(r.First) || r.First.Is4() != r.Last.Is4() || r.First.Zone() != "" || r.Last.Zone() != "" {
			t.Fatalf("ParseRange(%q) accepted %v", s, r)
		}
		back, err := ParseRange(r.String())
		if err != nil || back != r {
			t.Fatalf("round trip of %q via %q: %v, %v", s, r.String(), back, err)
		}
		if !r.Contains(r.First) || !r.Contains(r.Last) {
			t.Fatalf("%v does not contain its ends", r)
		}
	})
}
