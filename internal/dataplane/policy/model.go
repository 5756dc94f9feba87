package policy

import (
	"fmt"
	"net/netip"
	"regexp"
)

// Node is everything one node enforces: one Endpoint per local pod
// interface.
type Node struct {
	Endpoints []Endpoint
}

// Endpoint is a local pod interface and the decisions for traffic to it
// (Ingress) and from it (Egress).
type Endpoint struct {
	// HostVeth is the host side of the pod's veth (podnet.HostVethName).
	HostVeth string
	// Addrs are the pod's addresses on that interface.
	Addrs   []netip.Addr
	Ingress Direction
	Egress  Direction
}

// Direction is one direction's tiers. The zero value admits everything.
type Direction struct {
	// Admin holds the admin tier's rules (ClusterNetworkPolicy, tier
	// Admin) that apply to the pod in this direction, in evaluation order
	// (priority, then policy, then rule order): the first that matches
	// decides.
	Admin []AdminRule
	// Isolated says a NetworkPolicy selects the pod for this direction:
	// then what no rule of Allow matches is dropped, and Baseline is not
	// consulted.
	Isolated bool
	// Allow is the union of the rules of those NetworkPolicies.
	Allow []Rule
	// Baseline holds the baseline tier's rules (ClusterNetworkPolicy, tier
	// Baseline; Allow or Deny) in evaluation order, for a pod that is not
	// Isolated.
	Baseline []AdminRule
}

// Action is what an admin or baseline rule does with what it matches.
type Action uint8

// Actions. Pass is for the admin tier only.
const (
	Allow Action = iota + 1
	Deny
	Pass
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "Allow"
	case Deny:
		return "Deny"
	case Pass:
		return "Pass"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// AdminRule is a rule of an admin or baseline policy.
type AdminRule struct {
	Rule
	Action Action
}

// Rule matches traffic by peer and port. For ingress the peer is the
// source, for egress the destination.
type Rule struct {
	// ID names the rule's peer set; rules with the same ID must have the
	// same Peers, and share one set per family. It should be stable for as
	// long as the rule exists (e.g. "np/<namespace>/<name>/ingress/<i>"),
	// so that a change of its peers changes set elements only.
	ID    string
	Peers Peers
	// Ports restricts the rule to these protocols and ports; empty matches
	// every protocol and port.
	Ports []Port
}

// Peers is the address set a rule matches: everything when Any, otherwise
// the union of Blocks (empty: nothing).
type Peers struct {
	Any    bool
	Blocks []Block
}

// Block is CIDR without the prefixes in Except (an ipBlock; a selected pod
// is a Block of its /32 or /128).
type Block struct {
	CIDR   netip.Prefix
	Except []netip.Prefix
}

// Protocol is an IP protocol number a port can name.
type Protocol uint8

// Protocols with ports.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return fmt.Sprintf("proto%d", uint8(p))
}

// Port is a destination port range of a protocol: From 0 means every port,
// To 0 means From alone. Named ports are resolved upstream.
type Port struct {
	Protocol Protocol
	From, To uint16
}

// last is the range's last port.
func (p Port) last() uint16 {
	if p.To == 0 {
		return p.From
	}
	return p.To
}

// vethName is what Validate accepts as a host veth: a link name of at most
// 15 bytes with no character nft's names or our chain names would trip on.
var vethName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// Validate reports the first thing in n the compiler cannot honour.
func (n Node) Validate() error {
	seen := map[string]bool{}
	for i, e := range n.Endpoints {
		if !vethName.MatchString(e.HostVeth) {
			return fmt.Errorf("endpoint %d: host veth %q is not a link name", i, e.HostVeth)
		}
		if seen[e.HostVeth] {
			return fmt.Errorf("endpoint %d: host veth %s appears twice", i, e.HostVeth)
		}
		seen[e.HostVeth] = true
		if err := e.validateAddrs(); err != nil {
			return err
		}
		if err := e.Ingress.validate(); err != nil {
			return fmt.Errorf("endpoint %s ingress: %w", e.HostVeth, err)
		}
		if err := e.Egress.validate(); err != nil {
			return fmt.Errorf("endpoint %s egress: %w", e.HostVeth, err)
		}
	}
	return nil
}

func (e Endpoint) validateAddrs() error {
	for _, a := range e.Addrs {
		if !a.IsValid() || a.Is4In6() {
			return fmt.Errorf("endpoint %s: address %v is not an IPv4 or IPv6 address", e.HostVeth, a)
		}
	}
	return nil
}

func (d Direction) validate() error {
	for i, r := range d.Admin {
		if r.Action < Allow || r.Action > Pass {
			return fmt.Errorf("admin rule %d (%s): action %v", i, r.ID, r.Action)
		}
		if err := r.Validate(); err != nil {
			return fmt.Errorf("admin rule %d: %w", i, err)
		}
	}
	for i, r := range d.Allow {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("networkpolicy rule %d: %w", i, err)
		}
	}
	for i, r := range d.Baseline {
		if r.Action != Allow && r.Action != Deny {
			return fmt.Errorf("baseline rule %d (%s): action %v (Allow or Deny)", i, r.ID, r.Action)
		}
		if err := r.Validate(); err != nil {
			return fmt.Errorf("baseline rule %d: %w", i, err)
		}
	}
	return nil
}

// Validate reports the first thing in r the compiler cannot honour: a
// rule with peers and no ID, a peer or except that is not a valid prefix
// of IPv4 or IPv6 (an IPv4-mapped IPv6 prefix is neither: the caller
// unmaps it), a protocol other than TCP, UDP and SCTP, a port range
// without a start or that ends before it starts.
func (r Rule) Validate() error {
	if r.ID == "" && !r.Peers.Any && len(r.Peers.Blocks) > 0 {
		return fmt.Errorf("rule with peers has no ID")
	}
	for _, b := range r.Peers.Blocks {
		if !b.CIDR.IsValid() || b.CIDR.Addr().Is4In6() {
			return fmt.Errorf("rule %s: peer %v is not a prefix", r.ID, b.CIDR)
		}
		for _, x := range b.Except {
			if !x.IsValid() || x.Addr().Is4In6() {
				return fmt.Errorf("rule %s: except %v of %v is not a prefix", r.ID, x, b.CIDR)
			}
		}
	}
	for _, p := range r.Ports {
		if p.Protocol != TCP && p.Protocol != UDP && p.Protocol != SCTP {
			return fmt.Errorf("rule %s: protocol %v", r.ID, p.Protocol)
		}
		if p.From == 0 && p.To != 0 {
			return fmt.Errorf("rule %s: %v port range without a start", r.ID, p.Protocol)
		}
		if p.To != 0 && p.To < p.From {
			return fmt.Errorf("rule %s: %v port range %d-%d ends before it starts", r.ID, p.Protocol, p.From, p.To)
		}
	}
	return nil
}

// Packet is what Decide looks at: the peer's address (the source for
// ingress, the destination for egress), the protocol and, for TCP, UDP and
// SCTP, the destination port.
type Packet struct {
	Peer     netip.Addr
	Protocol uint8
	Port     uint16
}

// Decide says whether a direction admits the first packet of a flow: the
// tiers' semantics, written plainly.
func (d Direction) Decide(p Packet) bool {
admin:
	for _, r := range d.Admin {
		if !r.Matches(p) {
			continue
		}
		switch r.Action {
		case Allow:
			return true
		case Deny:
			return false
		case Pass:
			break admin
		}
	}
	if d.Isolated {
		for _, r := range d.Allow {
			if r.Matches(p) {
				return true
			}
		}
		return false
	}
	for _, r := range d.Baseline {
		if r.Matches(p) {
			return r.Action == Allow
		}
	}
	return true
}

// Matches says whether p is to (or from) one of r's peers on one of its
// ports.
func (r Rule) Matches(p Packet) bool {
	return r.Peers.Contains(p.Peer) && portsMatch(r.Ports, p)
}

// Contains says whether a is in the peer set.
func (ps Peers) Contains(a netip.Addr) bool {
	if ps.Any {
		return true
	}
	for _, b := range ps.Blocks {
		if !b.CIDR.Masked().Contains(a) {
			continue
		}
		excepted := false
		for _, x := range b.Except {
			if x.Masked().Contains(a) {
				excepted = true
				break
			}
		}
		if !excepted {
			return true
		}
	}
	return false
}

func portsMatch(ports []Port, p Packet) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pt := range ports {
		if uint8(pt.Protocol) != p.Protocol {
			continue
		}
		if pt.From == 0 || (p.Port >= pt.From && p.Port <= pt.last()) {
			return true
		}
	}
	return false
}
