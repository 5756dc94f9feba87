// Package fastpath owns estuary's forwarding fast path: a tc ingress BPF
// program (bpf/fastpath.c) that forwards a node's established pod traffic
// straight to its next device, and the maps that tell it the cluster's
// subnets and the node's pod veths. Loading and the maps are here; the
// attachments to devices are made through the consumer's TC interface (the
// ops package), and which devices get it is the caller's to say.
//
// # Design
//
// Why. A pod's packet crosses its veth pair and is then forwarded by the
// node like any router's: policy rules and tables, netfilter's PREROUTING,
// FORWARD and POSTROUTING with conntrack and kube-proxy's chains, then the
// neighbour table. The node's own packets skip all of that. The program does
// the forwarding decision the kernel would make (bpf_fib_lookup, which walks
// the same policy rules and tables) at the first device the packet meets and
// hands the packet to the output device's neighbour layer
// (bpf_redirect_neigh), or straight into the destination pod's namespace
// (bpf_redirect_peer) when that is a local pod, so the receiving pod's
// packets skip the second backlog queue as well.
//
// What it may skip. Only what rewrites nothing and decides nothing new: the
// fast path never carries a flow the node's policy would drop.
//   - TCP and UDP packets of flows conntrack already holds (bpf_skb_ct_lookup)
//     as established, with no NAT, no helper and no sequence adjustment.
//     Every first packet, every NATed flow (kube-proxy's Services and
//     NodePorts, portmap's hostPorts, natOutgoing masquerade) and every
//     flow conntrack does not know takes the stack's path, and so does
//     every TCP SYN, FIN and RST, so conntrack still sees how each
//     connection starts and ends. The program refreshes the entry's timeout
//     as conntrack would for a packet it saw.
//   - ICMP echo requests and replies between cluster addresses, or from a
//     subnet without natOutgoing, on a node that does not enforce
//     NetworkPolicy (echoes have no conntrack lookup here; no NAT rewrites
//     an echo between pod addresses, and only natOutgoing's masquerade
//     rewrites one leaving the cluster). On a node that does
//     (Options.EchoViaStack), every ICMP packet takes the stack's path:
//     without a conntrack lookup the program cannot tell an echo the policy
//     table accepts from one it drops, so the table, in netfilter's FORWARD
//     and INPUT hooks, decides each one. ICMP errors carry inner headers
//     NAT rewrites and take the stack's path either way.
//     Such a program starts by sending only requests to the stack
//     (Echoes): while it replaces a program that forwarded echoes, device
//     by device, a request may pass one device's old program, past
//     conntrack, and its reply reach another device's new one; conntrack,
//     which never saw the request, finds the reply invalid and kube-proxy
//     drops it. Once the program runs on every device and the echoes in
//     flight are answered (Options.EchoSettle), the Attacher sends replies
//     to the stack too, with one write every device sees at once.
//   - Packets to or from a cluster subnet (the subnets map). Anything else
//     the node forwards is none of estuary's business.
//
// Conntrack therefore sees a flow's handshake and teardown but not the data
// between them, so its TCP window tracking falls behind; the daemon sets
// net.netfilter.nf_conntrack_tcp_be_liberal=1 with the fast path, so a FIN
// after fast-forwarded data is not judged out of window (and dropped by
// kube-proxy's INVALID rule). Other netfilter rules that act on established
// flows (rare; NetworkPolicy implementations, estuary's among them, accept
// established flows) are bypassed for those flows: the daemon's
// --fast-path=false turns the program off and removes it.
//
// Policy. The node's policy table (nftables' inet estuary-policy, in the
// FORWARD and INPUT hooks) accepts established and related flows before any
// of its rules, so a TCP or UDP flow the program forwards, one
// conntrack holds as established, is one whose first packets took the
// stack's path and were accepted there. When a policy changes, established
// flows keep flowing until conntrack forgets them (they time out or end),
// on the fast path and on the stack's path alike, since the table accepts
// them on both; new flows are decided by the new policy at once, as their
// first packets take the stack's path.
//
// What it leaves. Anything the kernel would not simply forward: local
// delivery, a route that is not unicast, a packet that would need
// fragmenting, IPv4 options, IPv6 extension headers, fragments, an expiring
// TTL, VLAN-tagged frames. Those return TC_ACT_UNSPEC, so any later tc
// filter still runs and the stack handles them as before.
//
// The overlay's tunnel. When the route of a forwarded packet is the
// overlay's VXLAN device and the neighbour entry of its next hop (a remote
// pod, answered with that node's VTEP MAC) is resolved, the program
// encapsulates the packet itself, in the device's own wire format (VNI,
// port, inner MACs, no outer UDP checksum, outer ECN per RFC 6040), and
// sends it out of the underlay device to the VTEP's resolved neighbour:
// the device's transmit path and the outer packet's routing and netfilter
// hooks are skipped. bpf_skb_adjust_room's encapsulation flags mark GSO
// packets as UDP tunnel ones, so they are segmented (or offloaded) as the
// device's would be. Anything it cannot do so (an unknown VTEP, an
// unresolved underlay neighbour, an IPv6 underlay, a packet too large for
// the tunnel) goes to the device as before.
//
// On the underlay device it decapsulates VXLAN packets for the node's
// tunnel from known VTEPs (the outer source must be the address published
// for the inner source MAC) and carries on with the inner packet as if it
// had arrived on the tunnel: forwarded into a local pod, or handed to the
// tunnel device's ingress (bpf_redirect with BPF_F_INGRESS), where the
// stack takes it exactly as from the device. GRO aggregates are left to
// the device: only the device resets an skb's tunnel GSO state on
// decapsulation (bpf_skb_adjust_room gains that only with
// BPF_F_ADJ_ROOM_DECAP_L4_UDP, after Linux 6.18), and an aggregate keeping
// it would be segmented wrongly if its pod forwarded it. So are packets
// marked CE, and anything not unicast to the tunnel's MAC (ARP, floods).
// Small packets (ACKs, requests, echoes) therefore skip the device both
// ways; bulk data skips it on the sending node only.
//
// Restarts. The program and its maps live as long as a tc filter holds them,
// not as long as the daemon: a stopped daemon leaves the last program
// forwarding with the last maps. A starting daemon loads a fresh program,
// fills its maps from the API and the state DB, then replaces the filter on
// each device; no map is pinned and no state is carried over.
package fastpath

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// Name is the program's name; the tc filter carries it.
const Name = "estuary_fastpath"

// Options are the program's load-time settings.
type Options struct {
	// TCPTimeout and UDPTimeout are the conntrack timeouts the program
	// refreshes with: the node's nf_conntrack_tcp_timeout_established and
	// nf_conntrack_udp_timeout_stream. Zero leaves the kernel's defaults
	// (5 days, 120 s).
	TCPTimeout time.Duration
	UDPTimeout time.Duration
	// EchoViaStack is set when the node enforces NetworkPolicy: every ICMP
	// echo then passes through netfilter, where the policy table decides
	// it (the program forwards echoes without a conntrack lookup, so it
	// cannot tell an echo policy accepted from one it drops). TCP and UDP
	// flows conntrack holds as established stay on the fast path: the
	// policy table accepts established flows too.
	EchoViaStack bool
	// EchoSettle is how long the Attacher waits, once the program runs on
	// every device it wants, before it sends echo replies to the stack as
	// well (Echoes); 0 is DefaultEchoSettle.
	EchoSettle time.Duration
}

// DefaultEchoSettle is Options.EchoSettle's default: far longer than any
// echo between cluster addresses is in flight.
const DefaultEchoSettle = 2 * time.Second

// Echoes says which ICMP echoes between cluster addresses take the stack's
// path (echo_to_stack in bpf/fastpath.c).
type Echoes uint32

const (
	// EchoesForwarded means the program forwards echoes (no policy enforced).
	EchoesForwarded Echoes = 0
	// EchoRequestsViaStack sends requests to the stack and forwards replies.
	// A program loaded with EchoViaStack starts here: a program it replaces
	// may have forwarded requests past conntrack, and conntrack drops a
	// reply to a request it never saw as invalid (kube-proxy's rule).
	EchoRequestsViaStack Echoes = 1
	// EchoesViaStack sends every echo to the stack, where the policy table
	// decides it. The Attacher moves a program loaded with EchoViaStack
	// here once it runs on every device and EchoSettle has passed, so
	// conntrack has seen the request of every reply still to come.
	EchoesViaStack Echoes = 2
)

// Program is the loaded fast path: the program and its maps.
type Program struct {
	objs fastpathObjects

	wantEchoes Echoes
	settle     time.Duration

	mu     sync.Mutex // guards closed and the echo_to_stack variable
	closed bool
}

// Load loads the program into the kernel. It fails with the verifier's log
// or the missing kernel feature (conntrack kfuncs need Linux 6.5 or later
// with BTF) when the kernel refuses it.
func Load(opts Options) (*Program, error) {
	spec, err := loadFastpath()
	if err != nil {
		return nil, fmt.Errorf("fast path: read the program: %w", err)
	}
	set := func(name string, d time.Duration) error {
		if d <= 0 {
			return nil
		}
		ms := d.Milliseconds()
		if ms > int64(^uint32(0)) {
			ms = int64(^uint32(0))
		}
		if err := spec.Variables[name].Set(uint32(ms)); err != nil {
			return fmt.Errorf("fast path: set %s: %w", name, err)
		}
		return nil
	}
	if err := errors.Join(set("tcp_timeout_ms", opts.TCPTimeout), set("udp_timeout_ms", opts.UDPTimeout)); err != nil {
		return nil, err
	}
	p := Program{wantEchoes: EchoesForwarded, settle: opts.EchoSettle}
	if p.settle <= 0 {
		p.settle = DefaultEchoSettle
	}
	start := EchoesForwarded
	if opts.EchoViaStack {
		p.wantEchoes, start = EchoesViaStack, EchoRequestsViaStack
	}
	if err := spec.Variables[fastpathVarEchoToStack].Set(uint32(start)); err != nil {
		return nil, fmt.Errorf("fast path: set %s: %w", fastpathVarEchoToStack, err)
	}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("fast path: load the program: %w", err)
	}
	return &p, nil
}

// Echoes reads which echoes take the stack's path now.
func (p *Program) Echoes() (Echoes, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errors.New("fast path: echoes: the program is closed")
	}
	var v uint32
	if err := p.objs.EchoToStack.Get(&v); err != nil {
		return 0, fmt.Errorf("fast path: read %s: %w", fastpathVarEchoToStack, err)
	}
	return Echoes(v), nil
}

// SetEchoes makes e the echoes that take the stack's path, on every device
// the program runs on at once.
func (p *Program) SetEchoes(e Echoes) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("fast path: set echoes: the program is closed")
	}
	if err := p.objs.EchoToStack.Set(uint32(e)); err != nil {
		return fmt.Errorf("fast path: set %s to %d: %w", fastpathVarEchoToStack, e, err)
	}
	return nil
}

// FD is the program's file descriptor, for a tc filter.
func (p *Program) FD() int { return p.objs.EstuaryFastpath.FD() }

// ID is the kernel's id of the program, as a tc filter listing shows it.
func (p *Program) ID() (uint32, error) {
	info, err := p.objs.EstuaryFastpath.Info()
	if err != nil {
		return 0, fmt.Errorf("fast path: program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("fast path: the kernel does not report program ids")
	}
	return uint32(id), nil
}

// Close releases the daemon's references; attached filters keep the
// program and its maps alive.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return p.objs.Close()
}

// Subnet is a cluster subnet as the program sees it.
type Subnet struct {
	CIDR        netip.Prefix
	NATOutgoing bool
}

func lpmKey(p netip.Prefix) fastpathLpmKey {
	p = p.Masked()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	return fastpathLpmKey{Prefixlen: uint32(bits), Addr: p.Addr().As16()}
}

// SetSubnets makes the subnets map hold exactly subnets.
func (p *Program) SetSubnets(subnets []Subnet) error {
	want := map[fastpathLpmKey]fastpathSubnetInfo{}
	for _, s := range subnets {
		if !s.CIDR.IsValid() {
			continue
		}
		var info fastpathSubnetInfo
		if s.NATOutgoing {
			info.Flags = subnetNATOutgoing
		}
		want[lpmKey(s.CIDR)] = info
	}
	return syncMap(p.objs.Subnets, want, "subnets")
}

// subnetNATOutgoing is SUBNET_NAT_OUTGOING in bpf/fastpath.c.
const subnetNATOutgoing = 1

// SetPods makes the pod_ifs map hold exactly ifindexes: the host-side veths
// of the node's pods.
func (p *Program) SetPods(ifindexes []int) error {
	want := map[uint32]uint32{}
	for _, i := range ifindexes {
		if i > 0 {
			want[uint32(i)] = 1
		}
	}
	return syncMap(p.objs.PodIfs, want, "pod_ifs")
}

// syncMap writes want into m and deletes every other key.
func syncMap[K comparable, V comparable](m *ebpf.Map, want map[K]V, name string) error {
	var (
		k     K
		v     V
		stale []K
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		if w, ok := want[k]; !ok {
			stale = append(stale, k)
		} else if w == v {
			delete(want, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("fast path: read map %s: %w", name, err)
	}
	var errs []error
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("fast path: map %s: delete %v: %w", name, k, err))
		}
	}
	for k, v := range want {
		if err := m.Put(k, v); err != nil {
			errs = append(errs, fmt.Errorf("fast path: map %s: put %v: %w", name, k, err))
		}
	}
	return errors.Join(errs...)
}

// Stats counts the program's verdicts since it was loaded, summed over CPUs.
type Stats struct {
	PassOther     uint64 // not cluster traffic, or not a kind the program forwards
	PassConntrack uint64 // a new, NATed or unestablished flow; a SYN, FIN or RST
	PassRoute     uint64 // the kernel would not forward it as it is
	RedirectPeer  uint64 // delivered into a local pod
	RedirectNeigh uint64 // sent out of a device through the neighbour table
	Encap         uint64 // encapsulated for a remote VTEP and sent out of the underlay
	Decap         uint64 // decapsulated from a remote VTEP (then counted again by its verdict)
}

// Stats reads the program's counters.
func (p *Program) Stats() (Stats, error) {
	var out [7]uint64
	for i := range out {
		var per []uint64
		if err := p.objs.Stats.Lookup(uint32(i), &per); err != nil {
			return Stats{}, fmt.Errorf("fast path: read counter %d: %w", i, err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return Stats{PassOther: out[0], PassConntrack: out[1], PassRoute: out[2], RedirectPeer: out[3], RedirectNeigh: out[4],
		Encap: out[5], Decap: out[6]}, nil
}
