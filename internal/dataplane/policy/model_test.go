package policy

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

var (
	tcp80  = Port{Protocol: TCP, From: 80}
	pfx    = netip.MustParsePrefix
	addr   = netip.MustParseAddr
	anyone = Peers{Any: true}
)

func peers(ps ...string) Peers {
	var out Peers
	for _, p := range ps {
		out.Blocks = append(out.Blocks, Block{CIDR: pfx(p)})
	}
	return out
}

func pkt(peer string, proto Protocol, port uint16) Packet {
	return Packet{Peer: addr(peer), Protocol: uint8(proto), Port: port}
}

// decideBoth checks Decide and the compiled ruleset agree with want for
// an ingress direction d.
func decideBoth(t *testing.T, name string, d Direction, p Packet, want bool) {
	t.Helper()
	if got := d.Decide(p); got != want {
		t.Errorf("%s: Decide(%+v) = %v, want %v", name, p, got, want)
	}
	rs, err := Compile(Node{Endpoints: []Endpoint{{HostVeth: "est0", Ingress: d}}})
	if err != nil {
		t.Fatalf("%s: compile: %v", name, err)
	}
	if got := admits(t, rs, IngressMap, "est0", p); got != want {
		t.Errorf("%s: compiled ruleset admits %+v = %v, want %v\n%v", name, p, got, want, rs.Chains)
	}
}

func TestAdminPriorityOrder(t *testing.T) {
	d := Direction{Admin: []AdminRule{
		{Rule{ID: "a/0", Peers: peers("10.0.0.1/32")}, Deny},
		{Rule{ID: "b/0", Peers: peers("10.0.0.0/24")}, Allow},
	}, Isolated: true}
	decideBoth(t, "first rule denies", d, pkt("10.0.0.1", TCP, 80), false)
	decideBoth(t, "second rule allows over the NetworkPolicy tier", d, pkt("10.0.0.2", TCP, 80), true)
	d.Admin[0], d.Admin[1] = d.Admin[1], d.Admin[0]
	decideBoth(t, "allow first wins", d, pkt("10.0.0.1", TCP, 80), true)
}

func TestPassFallsToNetworkPolicyTier(t *testing.T) {
	d := Direction{
		Admin: []AdminRule{
			{Rule{ID: "pass", Peers: peers("10.0.0.0/24")}, Pass},
			{Rule{ID: "deny", Peers: peers("10.0.0.0/16")}, Deny},
		},
		Isolated: true,
		Allow:    []Rule{{ID: "np", Peers: peers("10.0.0.1/32"), Ports: []Port{tcp80}}},
		Baseline: []AdminRule{{Rule{ID: "banp", Peers: anyone}, Allow}},
	}
	decideBoth(t, "passed, NetworkPolicy allows", d, pkt("10.0.0.1", TCP, 80), true)
	decideBoth(t, "passed, NetworkPolicy denies by default (later admin deny skipped)", d, pkt("10.0.0.2", TCP, 80), false)
	decideBoth(t, "not passed: later admin deny", d, pkt("10.0.1.1", TCP, 80), false)
	d.Isolated, d.Allow = false, nil
	decideBoth(t, "passed, not isolated: baseline allows", d, pkt("10.0.0.2", TCP, 80), true)
}

func TestBaselineBelowNetworkPolicy(t *testing.T) {
	base := []AdminRule{{Rule{ID: "banp-deny", Peers: peers("10.0.0.0/24")}, Deny}}
	isolated := Direction{Isolated: true, Allow: []Rule{{ID: "np", Peers: peers("10.0.0.1/32")}}, Baseline: base}
	decideBoth(t, "NetworkPolicy allow beats baseline deny", isolated, pkt("10.0.0.1", UDP, 53), true)
	decideBoth(t, "isolated: default deny, baseline not consulted", isolated, pkt("10.9.0.1", UDP, 53), false)
	open := Direction{Baseline: base}
	decideBoth(t, "not isolated: baseline denies", open, pkt("10.0.0.1", UDP, 53), false)
	decideBoth(t, "not isolated: nothing matches, allowed", open, pkt("10.9.0.1", UDP, 53), true)
	allow := Direction{Baseline: []AdminRule{
		{Rule{ID: "a", Peers: peers("10.0.0.1/32")}, Allow}, {Rule{ID: "d", Peers: anyone}, Deny}}}
	decideBoth(t, "baseline allow before deny", allow, pkt("10.0.0.1", TCP, 1), true)
	decideBoth(t, "baseline deny", allow, pkt("10.0.0.2", TCP, 1), false)
}

func TestDefaultDenyOnlyWhereSelected(t *testing.T) {
	n := Node{Endpoints: []Endpoint{
		{HostVeth: "estsel", Ingress: Direction{Isolated: true}},
		{HostVeth: "estfree"},
	}}
	rs, err := Compile(n)
	if err != nil {
		t.Fatal(err)
	}
	p := pkt("10.0.0.9", TCP, 80)
	if admits(t, rs, IngressMap, "estsel", p) {
		t.Error("isolated ingress with no rules admits")
	}
	if !admits(t, rs, EgressMap, "estsel", p) {
		t.Error("egress of a pod isolated for ingress only is denied")
	}
	if !admits(t, rs, IngressMap, "estfree", p) || !admits(t, rs, EgressMap, "estfree", p) {
		t.Error("a pod no policy selects is denied")
	}
	if _, ok := rs.Ingress["estfree"]; ok || len(rs.Egress) != 0 {
		t.Errorf("map entries for directions that admit all: %v %v", rs.Ingress, rs.Egress)
	}
}

func TestIPBlockExcept(t *testing.T) {
	d := Direction{Isolated: true, Allow: []Rule{{ID: "blk", Peers: Peers{Blocks: []Block{
		{CIDR: pfx("10.0.0.0/16"), Except: []netip.Prefix{pfx("10.0.1.0/24"), pfx("10.0.0.128/25")}},
		{CIDR: pfx("fd00::/64"), Except: []netip.Prefix{pfx("fd00::/120")}},
	}}}}}
	for peer, want := range map[string]bool{
		"10.0.0.1": true, "10.0.0.127": true, "10.0.0.128": false, "10.0.1.5": false,
		"10.0.2.0": true, "10.1.0.0": false, "fd00::1": false, "fd00::100": true, "fd01::1": false,
	} {
		decideBoth(t, "except "+peer, d, pkt(peer, TCP, 80), want)
	}
	rs, _ := Compile(Node{Endpoints: []Endpoint{{HostVeth: "e", Ingress: d}}})
	want := []family.Range{{First: addr("10.0.0.0"), Last: addr("10.0.0.127")}, {First: addr("10.0.2.0"), Last: addr("10.0.255.255")}}
	if got := rs.Sets[0].Ranges; len(rs.Sets) != 2 || !equalRanges(got, want) {
		t.Errorf("sets %+v, want the v4 one %v", rs.Sets, want)
	}
}

func TestEndPortRanges(t *testing.T) {
	d := Direction{Isolated: true, Allow: []Rule{{ID: "r", Peers: anyone, Ports: []Port{
		{Protocol: TCP, From: 8000, To: 8010}, {Protocol: UDP}, {Protocol: SCTP, From: 9}}}}}
	for _, c := range []struct {
		p    Packet
		want bool
	}{
		{pkt("10.0.0.1", TCP, 7999), false}, {pkt("10.0.0.1", TCP, 8000), true},
		{pkt("10.0.0.1", TCP, 8010), true}, {pkt("10.0.0.1", TCP, 8011), false},
		{pkt("10.0.0.1", UDP, 1), true}, {pkt("fd00::1", UDP, 65535), true},
		{pkt("10.0.0.1", SCTP, 9), true}, {pkt("10.0.0.1", SCTP, 10), false},
		{Packet{Peer: addr("10.0.0.1"), Protocol: 1}, false}, // ICMP: not among the ports
	} {
		decideBoth(t, "ports", d, c.p, c.want)
	}
}

// TestValidateRejects: Validate rejects each model the compiler cannot
// honour, and Compile then reports it and compiles the rest: the good
// endpoint beside it keeps exactly the chains and sets it has alone, and
// the bad one, when it has a link name, gets chains that drop everything.
func TestValidateRejects(t *testing.T) {
	mapped := Rule{ID: "m", Peers: Peers{Blocks: []Block{{CIDR: pfx("::/0"), Except: []netip.Prefix{pfx("::ffff:0:0/96")}}}}}
	good := Endpoint{HostVeth: "good", Ingress: Direction{Isolated: true, Allow: []Rule{{ID: "g", Peers: peers("10.1.0.0/16"), Ports: []Port{tcp80}}}}}
	alone, err := Compile(Node{Endpoints: []Endpoint{good}})
	if err != nil {
		t.Fatal(err)
	}
	both := []string{"i-a", "e-a"}
	for name, tc := range map[string]struct {
		bad    []Endpoint
		closed []string // the chains that drop everything
	}{
		"bad veth":        {[]Endpoint{{HostVeth: "a b"}}, nil},
		"veth twice":      {[]Endpoint{{HostVeth: "a"}, {HostVeth: "a"}}, both},
		"mapped address":  {[]Endpoint{{HostVeth: "a", Addrs: []netip.Addr{addr("::ffff:10.0.0.1")}}}, both},
		"baseline pass":   {[]Endpoint{{HostVeth: "a", Egress: Direction{Baseline: []AdminRule{{Rule{Peers: anyone}, Pass}}}}}, []string{"e-a"}},
		"range backwards": {[]Endpoint{{HostVeth: "a", Egress: Direction{Allow: []Rule{{Peers: anyone, Ports: []Port{{Protocol: TCP, From: 9, To: 8}}}}}}}, []string{"e-a"}},
		"icmp port":       {[]Endpoint{{HostVeth: "a", Egress: Direction{Allow: []Rule{{Peers: anyone, Ports: []Port{{Protocol: 1}}}}}}}, []string{"e-a"}},
		"no id":           {[]Endpoint{{HostVeth: "a", Ingress: Direction{Allow: []Rule{{Peers: peers("10.0.0.0/8")}}}}}, []string{"i-a"}},
		"mapped except":   {[]Endpoint{{HostVeth: "a", Egress: Direction{Isolated: true, Allow: []Rule{mapped}}}}, []string{"e-a"}},
	} {
		if err := (Node{Endpoints: tc.bad}).Validate(); err == nil {
			t.Errorf("%s: validates", name)
		}
		rs, err := Compile(Node{Endpoints: append([]Endpoint{good}, tc.bad...)})
		if err == nil {
			t.Errorf("%s: compiled without an error", name)
		}
		checkClosed(t, name, rs, alone, "good", tc.closed)
	}
	same := Rule{ID: "x", Peers: peers("10.0.0.0/8")}
	other := Rule{ID: "x", Peers: peers("10.0.0.0/9")}
	n := Node{Endpoints: []Endpoint{good, {HostVeth: "a", Ingress: Direction{Isolated: true, Allow: []Rule{same}}},
		{HostVeth: "b", Ingress: Direction{Isolated: true, Allow: []Rule{other}}}}}
	rs, err := Compile(n)
	if err == nil {
		t.Error("one ID with two peer sets compiled without an error")
	}
	withA, _ := Compile(Node{Endpoints: n.Endpoints[:2]})
	checkClosed(t, "one ID, two peer sets", rs, withA, "a", []string{"i-b"})
}

// checkClosed checks that rs holds alone's chains and sets (those of
// keep), and besides them only the chains closed, each dropping
// everything.
func checkClosed(t *testing.T, name string, rs, alone Ruleset, keep string, closed []string) {
	t.Helper()
	want := Ruleset{Sets: alone.Sets, Chains: slices.Clone(alone.Chains), Ingress: maps.Clone(alone.Ingress), Egress: maps.Clone(alone.Egress),
		Counters: alone.Counters}
	for _, c := range closed {
		m, veth := want.Ingress, strings.TrimPrefix(c, "i-")
		if strings.HasPrefix(c, "e-") {
			m, veth = want.Egress, strings.TrimPrefix(c, "e-")
		}
		m[veth] = c
		want.Chains = append(want.Chains, dropAll(c))
	}
	slices.SortFunc(want.Chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	if !reflect.DeepEqual(rs, want) {
		t.Errorf("%s: ruleset\n%+v\nwant %s kept as alone and %v dropping all:\n%+v", name, rs, keep, closed, want)
	}
	if p := pkt("10.1.0.1", TCP, 80); !admits(t, rs, IngressMap, keep, p) {
		t.Errorf("%s: %s no longer admits %+v", name, keep, p)
	}
}

func equalRanges(a, b []family.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
