package ipam

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// Allocator hands out addresses from a set of subnets grouped into networks. The
// zero value is not usable; create one with New. It is safe for concurrent use.
type Allocator struct {
	mu  sync.Mutex // serialises changes to the set of subnets and Rebuild
	idx atomic.Pointer[index]
}

// index is an immutable view of the subnets and networks, replaced as a whole.
type index struct {
	subnets  map[string]*subnet
	names    []string          // subnet names, sorted
	members  map[string]member // by subnet name
	networks map[string]*network
}

// network lists a network's subnets per family, in ascending order of name.
type network struct {
	name    string
	members [2][]member
}

// member is a subnet as seen by network-wide allocation.
type member struct {
	s       *subnet
	network string
	private bool
}

// New returns an allocator without subnets.
func New() *Allocator {
	a := &Allocator{}
	a.idx.Store(buildIndex(nil))
	return a
}

// buildIndex indexes subnets. The caller holds Allocator.mu, so every layout is
// stable.
func buildIndex(subnets map[string]*subnet) *index {
	idx := &index{subnets: subnets, members: make(map[string]member), networks: make(map[string]*network)}
	if idx.subnets == nil {
		idx.subnets = make(map[string]*subnet)
	}
	idx.names = slices.Sorted(maps.Keys(idx.subnets))
	for _, name := range idx.names {
		s := idx.subnets[name]
		cfg := &s.lay.cfg
		n := idx.networks[cfg.Network]
		if n == nil {
			n = &network{name: cfg.Network}
			idx.networks[cfg.Network] = n
		}
		m := member{s: s, network: cfg.Network, private: cfg.Private}
		idx.members[name] = m
		f, _ := s.family.Index()
		n.members[f] = append(n.members[f], m)
	}
	return idx
}

func (a *Allocator) subnet(name string) (*subnet, error) {
	s := a.idx.Load().subnets[name]
	if s == nil {
		return nil, unknownSubnet(name)
	}
	return s, nil
}

// checkOverlap enforces the rule for subnets that share addresses
// (Footprint.Conflicts) across every network the allocator knows, refusing
// with the first conflict. The caller holds Allocator.mu, so every layout is
// stable.
func checkOverlap(idx *index, l *layout) error {
	name, p, fp := l.cfg.Name, l.cfg.Prefix, l.footprint()
	for _, oname := range idx.names {
		o := idx.subnets[oname].lay
		if oname == name || !o.cfg.Prefix.Overlaps(p) {
			continue
		}
		if c := fp.Conflicts(o.footprint()); len(c) > 0 {
			return overlapError(l, o, c[0])
		}
	}
	return nil
}

// overlapError words conflict c between the subnet of l and the one of o.
func overlapError(l, o *layout, c Conflict) error {
	name, p, oname := l.cfg.Name, l.cfg.Prefix, o.cfg.Name
	switch c {
	case ConflictNetwork:
		return invalidConfig(name, "prefix %s overlaps subnet %q (%s) of network %q; subnets may share addresses only within one network",
			p, oname, o.cfg.Prefix, o.cfg.Network)
	case ConflictPrefix:
		return invalidConfig(name, "prefix %s overlaps subnet %q (%s) of network %q; subnets of one network may share only an identical prefix",
			p, oname, o.cfg.Prefix, o.cfg.Network)
	case ConflictWindow:
		return invalidConfig(name, "window %s-%s overlaps subnet %q's window %s-%s in the shared prefix %s; windows of subnets with one prefix must be disjoint",
			l.addr(l.start), l.addr(l.end), oname, o.addr(o.start), o.addr(o.end), p)
	case ConflictHoldsGateway:
		return invalidConfig(name, "window %s-%s holds subnet %q's gateway %s", l.addr(l.start), l.addr(l.end), oname, o.cfg.Gateway)
	default:
		return invalidConfig(name, "gateway %s is inside subnet %q's window %s-%s, which may hand it out", l.cfg.Gateway, oname, o.addr(o.start), o.addr(o.end))
	}
}

// AddSubnet validates cfg and adds the subnet, holding records from the
// start: the subnet becomes visible to allocation only together with them, so
// an address recorded before the subnet was added can never be handed out in
// between. Configuration errors are of kind ErrInvalidConfig (see
// SubnetConfig and checkOverlap for the rules) and add nothing. Records are
// placed as Rebuild places them; their problems (an address outside the
// prefix, recorded twice, a record of another subnet) come back in a
// *RebuildError, and the subnet is added all the same with every record that
// could be placed.
func (a *Allocator) AddSubnet(cfg SubnetConfig, records ...Record) error {
	l, err := newLayout(cfg)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := a.idx.Load()
	if _, dup := idx.subnets[cfg.Name]; dup {
		return invalidConfig(cfg.Name, "a subnet of that name already exists")
	}
	if err := checkOverlap(idx, l); err != nil {
		return err
	}
	s := newSubnet(l)
	var problems []*Error
	for i := range records {
		r := &records[i]
		if r.Subnet != cfg.Name {
			problems = append(problems, &Error{Kind: ErrUnknownSubnet, Subnet: r.Subnet, Addr: r.Addr, Owner: r.Owner,
				Detail: fmt.Sprintf("record of address %s for %q names subnet %q, not %q", r.Addr, r.Owner, r.Subnet, cfg.Name)})
			continue
		}
		problems = append(problems, rebuildOne(s, &s.h, r)...)
	}
	subnets := maps.Clone(idx.subnets)
	subnets[cfg.Name] = s
	a.idx.Store(buildIndex(subnets))
	if len(problems) > 0 {
		return &RebuildError{Problems: problems}
	}
	return nil
}

// UpdateSubnet replaces the configuration of the subnet named cfg.Name: reserved
// and excluded ranges, gateway, window, network and the private flag may change,
// the prefix cannot. The cursor is kept. Addresses held when the update makes them excluded, reserved or
// outside [Start, End] stay held (counted as Stranded in Stats if no longer
// allocatable); once released they are never handed out again.
func (a *Allocator) UpdateSubnet(cfg SubnetConfig) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := a.idx.Load()
	s := idx.subnets[cfg.Name]
	if s == nil {
		return unknownSubnet(cfg.Name)
	}
	if cfg.Prefix != s.prefix {
		return invalidConfig(cfg.Name, "prefix %s cannot change to %s", s.prefix, cfg.Prefix)
	}
	l, err := newLayout(cfg)
	if err != nil {
		return err
	}
	if err := checkOverlap(idx, l); err != nil {
		return err
	}
	old := s.lay.cfg
	s.mu.Lock()
	s.setLayout(l)
	s.mu.Unlock()
	if old.Network != cfg.Network || old.Private != cfg.Private {
		a.idx.Store(buildIndex(idx.subnets))
	}
	return nil
}

// RemoveSubnet removes a subnet. It refuses with ErrInUse while the subnet holds
// any address, allocated or retained: release them first.
func (a *Allocator) RemoveSubnet(name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := a.idx.Load()
	s := idx.subnets[name]
	if s == nil {
		return unknownSubnet(name)
	}
	s.mu.Lock()
	n := len(s.h.owners)
	if n == 0 {
		s.removed = true
	}
	s.mu.Unlock()
	if n > 0 {
		return &Error{Kind: ErrInUse, Subnet: name, Prefix: s.prefix,
			Detail: fmt.Sprintf("cannot remove: %d address(es) still held", n)}
	}
	subnets := maps.Clone(idx.subnets)
	delete(subnets, name)
	a.idx.Store(buildIndex(subnets))
	return nil
}

// Subnet returns the configuration of the named subnet.
func (a *Allocator) Subnet(name string) (SubnetConfig, error) {
	s, err := a.subnet(name)
	if err != nil {
		return SubnetConfig{}, err
	}
	if err := s.lockLive(); err != nil {
		return SubnetConfig{}, err
	}
	defer s.mu.Unlock()
	return s.lay.cfg.clone(), nil
}

// Subnets returns the names of all subnets in ascending order.
func (a *Allocator) Subnets() []string {
	return slices.Clone(a.idx.Load().names)
}

// do runs fn with the named subnet locked.
func (a *Allocator) do(name string, fn func(s *subnet) error) error {
	s, err := a.subnet(name)
	if err != nil {
		return err
	}
	if err := s.lockLive(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return fn(s)
}

func checkOwner(owner string) error {
	if owner == "" {
		return invalidRequest("owner is empty")
	}
	return nil
}

// AllocateIn hands out the next free address of the named subnet to owner
// (next-fit, skipping reserved addresses) and moves the subnet's cursor to it.
func (a *Allocator) AllocateIn(name, owner string) (netip.Addr, error) {
	if err := checkOwner(owner); err != nil {
		return netip.Addr{}, err
	}
	s, err := a.subnet(name)
	if err != nil {
		return netip.Addr{}, err
	}
	if err := s.lockLive(); err != nil {
		return netip.Addr{}, err
	}
	off, err := s.allocate(owner)
	var addr netip.Addr
	if err == nil {
		addr = s.lay.addr(off)
	}
	s.mu.Unlock()
	return addr, err
}

// Assign gives addr in the named subnet to owner. Reserved addresses may be
// assigned; addresses outside [Start, End] fail with ErrOutOfRange, the network,
// broadcast and gateway addresses and excluded ranges with ErrExcluded, and an
// address held by another owner with ErrInUse naming the holder. If owner already
// holds addr, a retained address becomes allocated again and an allocated one is
// left as it is. The cursor does not move.
func (a *Allocator) Assign(name string, addr netip.Addr, owner string) error {
	if err := checkOwner(owner); err != nil {
		return err
	}
	return a.do(name, func(s *subnet) error { return s.assign(addr, owner) })
}

// Release frees addr, allocated or retained, if owner holds it. It fails with
// ErrNotAllocated if nobody holds it and with ErrInUse, changing nothing, if
// another owner does.
func (a *Allocator) Release(name string, addr netip.Addr, owner string) error {
	s, err := a.subnet(name)
	if err != nil {
		return err
	}
	if err := s.lockLive(); err != nil {
		return err
	}
	err = s.release(addr, owner)
	s.mu.Unlock()
	return err
}

// Retain turns addr, held by owner, into a retained address: still held for
// owner, not free. A later Assign of addr by owner makes it allocated again.
func (a *Allocator) Retain(name string, addr netip.Addr, owner string) error {
	return a.do(name, func(s *subnet) error { return s.retain(addr, owner) })
}

// Transfer hands addr, held by from, to owner to in state st (Allocated or
// Retained) in one step, so the address is never free in between. It fails
// with ErrNotAllocated if nobody holds addr and with ErrInUse, changing
// nothing, if someone other than from does.
func (a *Allocator) Transfer(name string, addr netip.Addr, from, to string, st State) error {
	if err := checkOwner(to); err != nil {
		return err
	}
	if st != Allocated && st != Retained {
		return &Error{Kind: ErrInvalidRequest, Subnet: name, Addr: addr, Owner: to, Detail: fmt.Sprintf("cannot transfer %s to state %v", addr, st)}
	}
	return a.do(name, func(s *subnet) error { return s.transfer(addr, from, to, st) })
}

// CheckAddr reports whether addr could ever be assigned in a subnet
// configured as cfg: nil, or an error of kind ErrInvalidConfig (cfg),
// ErrOutOfRange (outside the prefix or the window [Start, End]) or
// ErrExcluded (network, broadcast, gateway or an excluded range). It holds
// nothing and needs no Allocator, so admission can check an address before
// any allocation.
func CheckAddr(cfg SubnetConfig, addr netip.Addr) error {
	c, err := NewChecker(cfg)
	if err != nil {
		return err
	}
	return c.Check(addr)
}

// Checker answers CheckAddr and Reserved for one subnet configuration,
// validated and laid out once, so that many addresses are checked against
// it for the cost of one layout. It is immutable and safe for concurrent
// use.
type Checker struct{ l *layout }

// NewChecker validates cfg; the error is of kind ErrInvalidConfig.
func NewChecker(cfg SubnetConfig) (*Checker, error) {
	l, err := newLayout(cfg)
	if err != nil {
		return nil, err
	}
	return &Checker{l: l}, nil
}

// Config is the configuration the checker was built from.
func (c *Checker) Config() SubnetConfig { return c.l.cfg }

// Check is CheckAddr of the checker's configuration and addr.
func (c *Checker) Check(addr netip.Addr) error {
	off, ok := c.l.offset(addr)
	if !ok {
		cfg := c.l.cfg
		return &Error{Kind: ErrOutOfRange, Subnet: cfg.Name, Prefix: cfg.Prefix, Addr: addr, Detail: fmt.Sprintf("address %s is outside %s", addr, cfg.Prefix)}
	}
	if e := c.l.refuse(off, addr); e != nil {
		return e
	}
	return nil
}

// Reserved reports whether addr is one of the configuration's reserved
// addresses that can be assigned (inside the window, not excluded): the
// ones next-fit skips and only an explicit assignment takes.
func (c *Checker) Reserved(addr netip.Addr) bool {
	off, ok := c.l.offset(addr)
	return ok && c.l.class(off) == classReserved
}

// Lookup returns the record of a held address, or ErrNotAllocated.
func (a *Allocator) Lookup(name string, addr netip.Addr) (Record, error) {
	var r Record
	err := a.do(name, func(s *subnet) error {
		off, ok := s.lay.offset(addr)
		if !ok {
			return s.outsidePrefix(addr)
		}
		e, ok := s.h.owners[off]
		if !ok {
			return s.notAllocated(addr, "")
		}
		r = Record{Subnet: s.name, Addr: addr, State: e.state, Owner: e.owner}
		return nil
	})
	return r, err
}

// SetCursor sets the subnet's last allocated address, as persisted in
// lastAllocatedIP: next-fit continues after it. Any address of the prefix is
// accepted.
func (a *Allocator) SetCursor(name string, addr netip.Addr) error {
	return a.do(name, func(s *subnet) error {
		off, ok := s.lay.offset(addr)
		if !ok {
			return s.outsidePrefix(addr)
		}
		s.cursor = off
		return nil
	})
}

// Cursor returns the subnet's last allocated address. Before the first
// allocation it is End, so that the search starts at Start.
func (a *Allocator) Cursor(name string) (netip.Addr, error) {
	var c netip.Addr
	err := a.do(name, func(s *subnet) error {
		c = s.lay.addr(s.cursor)
		return nil
	})
	return c, err
}

// Stats returns the address counts of the named subnet.
func (a *Allocator) Stats(name string) (Stats, error) {
	var st Stats
	err := a.do(name, func(s *subnet) error {
		st = s.stats()
		return nil
	})
	return st, err
}
