package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/estuary-cni/estuary/pkg/family"
)

// Request asks for addresses for one owner, one per family, as one transaction.
//
// For each family in Families, in order: if Subnets lists subnets for that
// family, they are tried in the order listed (private or not) and the first
// with a free address is used; otherwise the subnets of Network with that
// family are tried in ascending order of subnet name, skipping private ones,
// and the first with a free address is used.
//
// Every subnet listed for a family must exist, be of that family and belong
// to Network (when Network is empty, to the network of the family's first
// listed subnet); no name may be listed twice. An empty list is the same as
// none.
type Request struct {
	Owner    string
	Network  string                     // may be empty if every family has subnets in Subnets
	Families []family.Family            // empty means the families of Subnets, IPv4 first
	Subnets  map[family.Family][]string // optional subnets per family, in order of preference
}

// Lease is one address handed out by Allocate.
type Lease struct {
	Subnet  string
	Network string
	Family  family.Family
	Addr    netip.Addr
	Prefix  netip.Prefix
	Gateway netip.Addr // zero if the subnet has no gateway
}

// step is the plan for one family of a request.
type step struct {
	family     family.Family
	network    string
	candidates []member
	explicit   bool // the candidates are the subnets the request lists
}

// undo reverts one allocation of a failed transaction.
type undo struct {
	s          *subnet
	off        uint64
	prevCursor uint64
	lease      Lease
}

// Allocate serves req: one lease per requested family, in the order of
// req.Families. It is a transaction: if any family fails, the addresses already
// allocated for the others are released again (and their subnets' cursors put
// back if nothing else moved them), and the error names the family, the network
// and the subnet that failed.
func (a *Allocator) Allocate(req Request) ([]Lease, error) {
	if err := checkOwner(req.Owner); err != nil {
		return nil, err
	}
	steps, err := a.idx.Load().plan(req)
	if err != nil {
		return nil, err
	}
	done := make([]undo, 0, len(steps))
	for _, st := range steps {
		u, err := st.allocate(req.Owner)
		if err != nil {
			rolled := rollback(done, req.Owner)
			return nil, fmt.Errorf("allocate %s for %q in network %q: %w%s", st.family, req.Owner, st.network, err, rolled)
		}
		done = append(done, u)
	}
	leases := make([]Lease, len(done))
	for i, u := range done {
		leases[i] = u.lease
	}
	return leases, nil
}

// plan resolves the candidate subnets of each requested family.
func (idx *index) plan(req Request) ([]step, error) {
	fams := req.Families
	if len(fams) == 0 {
		for _, f := range []family.Family{family.IPv4, family.IPv6} {
			if len(req.Subnets[f]) > 0 {
				fams = append(fams, f)
			}
		}
	}
	if len(fams) == 0 {
		return nil, invalidRequest("no family requested")
	}
	for f, names := range req.Subnets {
		if len(names) > 0 && !slices.Contains(fams, f) {
			return nil, invalidRequest("subnets %q given for family %q, which is not requested", names, f)
		}
	}
	var seen [2]bool
	steps := make([]step, 0, len(fams))
	for _, f := range fams {
		fi, ok := f.Index()
		if !ok {
			return nil, invalidRequest("unknown family %q", f)
		}
		if seen[fi] {
			return nil, invalidRequest("family %s requested twice", f)
		}
		seen[fi] = true
		st, err := idx.planFamily(req, f, fi)
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, nil
}

func (idx *index) planFamily(req Request, f family.Family, fi int) (step, error) {
	if names := req.Subnets[f]; len(names) > 0 {
		return idx.planListed(req.Network, f, names)
	}
	if req.Network == "" {
		return step{}, invalidRequest("no network and no %s subnet given", f)
	}
	n := idx.networks[req.Network]
	if n == nil {
		return step{}, &Error{Kind: ErrUnknownNetwork, Network: req.Network, Detail: "no such network"}
	}
	var cands []member
	for _, m := range n.members[fi] {
		if !m.private {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		return step{}, &Error{Kind: ErrUnknownSubnet, Network: req.Network,
			Detail: fmt.Sprintf("no non-private %s subnet", f)}
	}
	return step{family: f, network: req.Network, candidates: cands}, nil
}

// planListed checks the subnets a request lists for family f and keeps
// their order: each must exist, be of family f and belong to network (or,
// when network is empty, to the network of the first one), and none may be
// listed twice.
func (idx *index) planListed(network string, f family.Family, names []string) (step, error) {
	whose := "" // the subnet network was taken from, when the request names none
	cands := make([]member, 0, len(names))
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			return step{}, invalidRequest("%s subnets %q name subnet %q twice", f, names, name)
		}
		m, ok := idx.members[name]
		switch {
		case !ok:
			return step{}, unknownSubnet(name)
		case m.s.family != f:
			return step{}, invalidRequest("subnet %q is %s, requested for %s", name, m.s.family, f)
		case network == "":
			network, whose = m.network, fmt.Sprintf(" (the network of subnet %q)", name)
		case m.network != network:
			return step{}, invalidRequest("subnet %q belongs to network %q, not %q%s", name, m.network, network, whose)
		}
		cands = append(cands, m)
	}
	return step{family: f, network: network, candidates: cands, explicit: true}, nil
}

// allocate takes the first free address of the step's candidates, in
// order, locking one subnet at a time. A full subnet passes the turn to the
// next; when every one is full the error names them all (a single listed
// subnet returns its own error). A listed subnet removed since the plan
// fails the step; a network's removed subnet is skipped.
func (st step) allocate(owner string) (undo, error) {
	tried := make([]string, 0, len(st.candidates))
	for _, m := range st.candidates {
		s := m.s
		if err := s.lockLive(); err != nil {
			if st.explicit {
				return undo{}, err
			}
			continue
		}
		prev := s.cursor
		off, err := s.allocate(owner)
		if err == nil {
			l := s.lay
			u := undo{s: s, off: off, prevCursor: prev, lease: Lease{
				Subnet: s.name, Network: st.network, Family: st.family,
				Addr: l.addr(off), Prefix: s.prefix, Gateway: l.cfg.Gateway,
			}}
			s.mu.Unlock()
			return u, nil
		}
		s.mu.Unlock()
		if st.explicit && len(st.candidates) == 1 {
			return undo{}, err
		}
		tried = append(tried, fmt.Sprintf("%q", s.name))
	}
	which := "no"
	if st.explicit {
		which = "no requested"
	}
	return undo{}, &Error{Kind: ErrExhausted, Network: st.network,
		Detail: fmt.Sprintf("%s %s subnet has a free address (tried %s)", which, st.family, strings.Join(tried, ", "))}
}

// rollback releases the allocations in done and describes what it did.
func rollback(done []undo, owner string) string {
	var b strings.Builder
	for _, u := range done {
		s := u.s
		s.mu.Lock()
		if e, ok := s.h.owners[u.off]; ok && e.owner == owner && e.state == Allocated {
			s.h.remove(u.off, e)
			if s.cursor == u.off {
				s.cursor = u.prevCursor
			}
		}
		s.mu.Unlock()
		fmt.Fprintf(&b, "; rolled back %s %s in subnet %q", u.lease.Family, u.lease.Addr, s.name)
	}
	return b.String()
}

// Networks returns the names of all networks in ascending order.
func (a *Allocator) Networks() []string {
	idx := a.idx.Load()
	names := make([]string, 0, len(idx.networks))
	for n := range idx.networks {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NetworkStats sums the statistics of the network's subnets of family, private
// ones included. Each count saturates at the maximum uint64 (several /64
// subnets hold more addresses than a uint64 counts).
func (a *Allocator) NetworkStats(network string, f family.Family) (Stats, error) {
	n := a.idx.Load().networks[network]
	if n == nil {
		return Stats{}, &Error{Kind: ErrUnknownNetwork, Network: network, Detail: "no such network"}
	}
	fi, ok := f.Index()
	if !ok {
		return Stats{}, invalidRequest("unknown family %q", f)
	}
	var st Stats
	for _, m := range n.members[fi] {
		if m.s.lockLive() != nil {
			continue
		}
		st.add(m.s.stats())
		m.s.mu.Unlock()
	}
	return st, nil
}
