package ipam

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/estuary-cni/estuary/pkg/family"
)

// SubnetConfig describes a subnet. A zero Gateway means no gateway; zero Start
// and End take the defaults of Window.
type SubnetConfig struct {
	Name    string        // unique among the allocator's subnets
	Network string        // the network the subnet belongs to
	Family  family.Family // optional; if set it must match Prefix
	Prefix  netip.Prefix  // canonical (masked); IPv6 prefixes must be /64 or longer
	Gateway netip.Addr    // optional; never handed out
	Start   netip.Addr    // optional first allocatable address
	End     netip.Addr    // optional last allocatable address
	// Reserved addresses are skipped by next-fit but may be assigned explicitly.
	Reserved []Range
	// Excluded addresses are never handed out.
	Excluded []Range
	// Private subnets are used by network-wide allocation only when named in the
	// request.
	Private bool
}

func (c SubnetConfig) clone() SubnetConfig {
	c.Reserved = slices.Clone(c.Reserved)
	c.Excluded = slices.Clone(c.Excluded)
	return c
}

// Entry classes: where an offset falls in a layout.
const (
	classNormal   uint8 = iota // allocatable, handed out by next-fit
	classReserved              // allocatable by explicit assignment only
	classBlocked               // never allocatable (any more)
)

// layout is the validated, offset-based form of a SubnetConfig. It is immutable
// once built; a subnet swaps in a new one when its configuration changes.
type layout struct {
	cfg        SubnetConfig
	is4        bool
	high       uint64 // IPv6: the upper 64 bits shared by every address in the prefix
	base       uint64 // lower 64 bits (IPv6) or the 32-bit value (IPv4) of the prefix address
	last       uint64 // largest offset within the prefix
	start, end uint64 // allocatable window
	gateway    uint64
	hasGateway bool
	broadcast  bool  // IPv4: the last offset is the broadcast address
	blocked    spans // never allocatable, within [start, end]
	reserved   spans // reserved and allocatable, within [start, end]
	skip       spans // blocked ∪ reserved: what next-fit jumps over
	total      uint64
	reservedN  uint64
}

// newLayout validates cfg and computes its layout.
func newLayout(cfg SubnetConfig) (*layout, error) {
	cfg = cfg.clone()
	if err := checkIdentity(cfg); err != nil {
		return nil, err
	}
	l := &layout{cfg: cfg, is4: cfg.Prefix.Addr().Is4()}
	l.setBase()
	if err := l.setWindow(); err != nil {
		return nil, err
	}
	if err := l.setRanges(); err != nil {
		return nil, err
	}
	return l, nil
}

func checkIdentity(cfg SubnetConfig) error {
	name, p := cfg.Name, cfg.Prefix
	switch {
	case name == "":
		return invalidConfig("", "subnet name is empty")
	case cfg.Network == "":
		return invalidConfig(name, "network name is empty")
	case !p.IsValid():
		return invalidConfig(name, "prefix is missing or invalid")
	case p != p.Masked():
		return invalidConfig(name, "prefix %s is not canonical (want %s)", p, p.Masked())
	case !p.Addr().Is4() && p.Bits() < 64:
		return invalidConfig(name, "IPv6 prefix %s is shorter than /64", p)
	case cfg.Family != "" && cfg.Family != family.Of(p.Addr()):
		return invalidConfig(name, "family %s does not match prefix %s", cfg.Family, p)
	}
	return nil
}

func (l *layout) setBase() {
	a := l.cfg.Prefix.Addr()
	hostBits := uint(a.BitLen() - l.cfg.Prefix.Bits())
	if hostBits == 64 {
		l.last = ^uint64(0)
	} else {
		l.last = 1<<hostBits - 1
	}
	if l.is4 {
		b := a.As4()
		l.base = uint64(binary.BigEndian.Uint32(b[:]))
		l.broadcast = true
		return
	}
	b := a.As16()
	l.high = binary.BigEndian.Uint64(b[:8])
	l.base = binary.BigEndian.Uint64(b[8:])
}

// offset converts a to an offset; ok is false if a is not inside the prefix.
func (l *layout) offset(a netip.Addr) (uint64, bool) {
	var off uint64
	if l.is4 {
		if !a.Is4() {
			return 0, false
		}
		b := a.As4()
		off = uint64(binary.BigEndian.Uint32(b[:])) - l.base
	} else {
		if !a.Is6() || a.Zone() != "" {
			return 0, false
		}
		b := a.As16()
		if binary.BigEndian.Uint64(b[:8]) != l.high {
			return 0, false
		}
		off = binary.BigEndian.Uint64(b[8:]) - l.base
	}
	return off, off <= l.last
}

// addr converts an offset within the prefix to an address.
func (l *layout) addr(off uint64) netip.Addr {
	if l.is4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(l.base+off))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], l.high)
	binary.BigEndian.PutUint64(b[8:], l.base+off)
	return netip.AddrFrom16(b)
}

// optOffset converts an optional address of the configuration.
func (l *layout) optOffset(what string, a netip.Addr) (uint64, bool, error) {
	if !a.IsValid() {
		return 0, false, nil
	}
	off, ok := l.offset(a)
	if !ok {
		return 0, false, invalidConfig(l.cfg.Name, "%s %s is outside prefix %s", what, a, l.cfg.Prefix)
	}
	return off, true, nil
}

func (l *layout) setWindow() error {
	name := l.cfg.Name
	if l.last == 0 || (l.broadcast && l.last == 1) {
		return invalidConfig(name, "prefix %s has no allocatable address", l.cfg.Prefix)
	}
	first, last := Window(l.cfg.Prefix, l.cfg.Start, l.cfg.End)
	start, _, err := l.optOffset("start", first)
	if err != nil {
		return err
	}
	end, _, err := l.optOffset("end", last)
	if err != nil {
		return err
	}
	if start > end {
		return invalidConfig(name, "start %s is after end %s", l.addr(start), l.addr(end))
	}
	l.start, l.end = start, end
	gw, ok, err := l.optOffset("gateway", l.cfg.Gateway)
	if err != nil {
		return err
	}
	if ok && (gw == 0 || (l.broadcast && gw == l.last)) {
		return invalidConfig(name, "gateway %s is the network or broadcast address", l.cfg.Gateway)
	}
	l.gateway, l.hasGateway = gw, ok
	return nil
}

// footprint is what the sharing rule sees of the layout.
func (l *layout) footprint() Footprint {
	return Footprint{Network: l.cfg.Network, Prefix: l.cfg.Prefix, Start: l.addr(l.start), End: l.addr(l.end), Gateway: l.cfg.Gateway}
}

// rangeSpans converts configured ranges to normalized offset spans.
func (l *layout) rangeSpans(what string, rs []Range) (spans, error) {
	out := make([]span, 0, len(rs))
	for _, r := range rs {
		if err := checkRange(r); err != nil {
			return nil, invalidConfig(l.cfg.Name, "%s range %s: %s", what, r, err)
		}
		lo, ok1 := l.offset(r.First)
		hi, ok2 := l.offset(r.Last)
		if !ok1 || !ok2 {
			return nil, invalidConfig(l.cfg.Name, "%s range %s is not inside prefix %s", what, r, l.cfg.Prefix)
		}
		out = append(out, span{lo, hi})
	}
	return normalize(out), nil
}

func (l *layout) setRanges() error {
	excluded, err := l.rangeSpans("excluded", l.cfg.Excluded)
	if err != nil {
		return err
	}
	reserved, err := l.rangeSpans("reserved", l.cfg.Reserved)
	if err != nil {
		return err
	}
	fixed := []span{{0, 0}}
	if l.broadcast {
		fixed = append(fixed, span{l.last, l.last})
	}
	if l.hasGateway {
		fixed = append(fixed, span{l.gateway, l.gateway})
	}
	l.blocked = union(excluded, normalize(fixed)).clip(l.start, l.end)
	l.reserved = reserved.clip(l.start, l.end).subtract(l.blocked)
	l.skip = union(l.blocked, l.reserved)
	// The window holds at most 2^64 offsets and offset 0 is always blocked, so the
	// true total fits in a uint64 and modular arithmetic yields it exactly.
	l.total = (l.end - l.start + 1) - l.blocked.count()
	l.reservedN = l.reserved.count()
	return nil
}

// class tells where off falls: blocked (outside the window or never allocatable),
// reserved, or normal.
func (l *layout) class(off uint64) uint8 {
	switch {
	case off < l.start || off > l.end || l.blocked.contains(off):
		return classBlocked
	case l.reserved.contains(off):
		return classReserved
	}
	return classNormal
}

// refuse returns why an explicit assignment of off is refused, or nil. a is the
// address off stands for.
func (l *layout) refuse(off uint64, a netip.Addr) *Error {
	var why string
	switch {
	case off == 0:
		why = "network address"
	case l.broadcast && off == l.last:
		why = "broadcast address"
	case l.hasGateway && off == l.gateway:
		why = "gateway"
	case off < l.start || off > l.end:
		return &Error{Kind: ErrOutOfRange, Subnet: l.cfg.Name, Addr: a,
			Detail: fmt.Sprintf("address %s is outside the allocatable range [%s, %s]", a, l.addr(l.start), l.addr(l.end))}
	case l.blocked.contains(off):
		why = "excluded range"
	default:
		return nil
	}
	return &Error{Kind: ErrExcluded, Subnet: l.cfg.Name, Addr: a, Detail: fmt.Sprintf("address %s is excluded (%s)", a, why)}
}
