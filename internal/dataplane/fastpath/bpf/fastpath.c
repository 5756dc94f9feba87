// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * estuary's forwarding fast path: a tc ingress program attached to the host
 * side of every pod's veth pair, to the overlay's VXLAN device and to the
 * uplink. The design (what is forwarded here, what is left to the kernel's
 * stack and why) is in ../fastpath.go.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <stdbool.h>

/* Kept here rather than from linux/icmp.h, which pulls in the C library. */
#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8
#define ICMPV6_ECHO_REQUEST 128
#define ICMPV6_ECHO_REPLY 129

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* Conntrack status bits (include/uapi/linux/netfilter/nf_conntrack_common.h). */
#define IPS_SEEN_REPLY (1UL << 1)
#define IPS_ASSURED (1UL << 2)
#define IPS_SRC_NAT (1UL << 4)
#define IPS_DST_NAT (1UL << 5)
#define IPS_SEQ_ADJUST (1UL << 6)
#define IPS_DYING (1UL << 9)
#define IPS_HELPER (1UL << 13)
#define IPS_NOT_FAST (IPS_SRC_NAT | IPS_DST_NAT | IPS_SEQ_ADJUST | IPS_DYING | IPS_HELPER)

#define BPF_F_CURRENT_NETNS (-1)

/* Only the fields read here; CO-RE relocates them against the kernel. */
struct nf_conn {
	unsigned long status;
} __attribute__((preserve_access_index));

struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u16 ct_zone_id;
	__u8 ct_zone_dir;
	__u8 reserved[3];
};

extern struct nf_conn *bpf_skb_ct_lookup(struct __sk_buff *skb, struct bpf_sock_tuple *tuple, __u32 tuple__sz,
					 struct bpf_ct_opts *opts, __u32 opts__sz) __ksym;
extern void bpf_ct_release(struct nf_conn *ct) __ksym;
extern int bpf_ct_change_timeout(struct nf_conn *ct, __u32 timeout) __ksym;

/* A subnet of the cluster: IPv4 as IPv4-mapped IPv6, prefixlen + 96. */
struct lpm_key {
	__u32 prefixlen;
	__u8 addr[16];
};

#define SUBNET_NAT_OUTGOING 1

struct subnet_info {
	__u32 flags;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, struct subnet_info);
} subnets SEC(".maps");

/* The host-side veths of local pods, by ifindex: delivered into the pod. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} pod_ifs SEC(".maps");

enum stat {
	STAT_PASS_OTHER,     /* not a cluster address, or not IP we forward here */
	STAT_PASS_CONNTRACK, /* no entry, not established, NATed, or a SYN/FIN/RST */
	STAT_PASS_ROUTE,     /* the kernel would not forward it, or it must fragment */
	STAT_REDIRECT_PEER,  /* delivered into a local pod */
	STAT_REDIRECT_NEIGH, /* sent out of a device through the neighbour table */
	STAT_ENCAP,          /* encapsulated for a remote VTEP and sent */
	STAT_DECAP,          /* decapsulated from a remote VTEP */
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* conntrack's established timeouts, set by the loader from the sysctls. */
volatile const __u32 tcp_timeout_ms = 432000000;
volatile const __u32 udp_timeout_ms = 120000;

/* Which ICMP echoes take the stack. On a node that enforces NetworkPolicy,
 * echoes have no conntrack lookup here, so all of them take the stack, where
 * the policy table in netfilter's hooks decides them (ECHO_ALL). A program
 * that replaces one which forwarded echoes starts with requests only
 * (ECHO_REQUESTS): a reply whose request the old program forwarded past
 * conntrack would be invalid to it and dropped. The daemon raises it to
 * ECHO_ALL once this program runs on every device and the echoes in flight
 * are answered. */
enum echo_to_stack {
	ECHO_NONE = 0,
	ECHO_REQUESTS = 1,
	ECHO_ALL = 2,
};
volatile __u32 echo_to_stack = ECHO_NONE;

/* struct flow's echo */
enum {
	ECHO_REQUEST = 1,
	ECHO_REPLY = 2,
};

static __always_inline bool echo_via_stack(__u8 echo)
{
	__u32 mode = echo_to_stack;
	return mode == ECHO_ALL || (mode == ECHO_REQUESTS && echo == ECHO_REQUEST);
}

struct flow {
	__u8 family;
	__u8 proto;
	__u8 tcp_flags; /* FIN, SYN, RST as in the TCP header's flag byte */
	__u8 echo;      /* ECHO_REQUEST or ECHO_REPLY for ICMP echoes, else 0 */
	__u16 tot_len;
	__be16 sport, dport;
	__u8 src[16], dst[16]; /* IPv4 as IPv4-mapped IPv6 */
};

static __always_inline int count(enum stat s, int verdict)
{
	__u32 key = s;
	__u64 *v = bpf_map_lookup_elem(&stats, &key);
	if (v)
		*v += 1;
	return verdict;
}

#include "vxlan.h"

/* pass leaves the packet to the stack: where it arrived, or, decapsulated
 * here, on the ingress of the tunnel it came through, as the device would
 * have delivered it. */
static __always_inline int pass(struct __sk_buff *skb, enum stat s, __u32 in_if)
{
	if (in_if == skb->ingress_ifindex)
		return count(s, TC_ACT_UNSPEC);
	return count(s, bpf_redirect(in_if, BPF_F_INGRESS));
}

static __always_inline void mapped(__u8 out[16], __be32 v4)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &v4, 4);
}

/* ports reads the L4 header at off: ports for TCP and UDP, flags for TCP, echo for ICMP. */
static __always_inline int ports(struct __sk_buff *skb, __u32 off, struct flow *f)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (f->proto == IPPROTO_TCP) {
		struct tcphdr *th = data + off;
		if ((void *)(th + 1) > end)
			return -1;
		f->sport = th->source;
		f->dport = th->dest;
		f->tcp_flags = (th->fin ? 1 : 0) | (th->syn ? 2 : 0) | (th->rst ? 4 : 0);
		return 0;
	}
	if (f->proto == IPPROTO_UDP) {
		struct udphdr *uh = data + off;
		if ((void *)(uh + 1) > end)
			return -1;
		f->sport = uh->source;
		f->dport = uh->dest;
		return 0;
	}
	__u8 *type = data + off;
	if ((void *)(type + 1) > end)
		return -1;
	if (*type == (f->proto == IPPROTO_ICMP ? ICMP_ECHO : ICMPV6_ECHO_REQUEST))
		f->echo = ECHO_REQUEST;
	else if (*type == (f->proto == IPPROTO_ICMP ? ICMP_ECHOREPLY : ICMPV6_ECHO_REPLY))
		f->echo = ECHO_REPLY;
	return 0;
}

/* parse fills f from the frame; -1 for anything the fast path leaves alone. */
static __always_inline int parse(struct __sk_buff *skb, struct flow *f)
{
	const __u32 need = sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + sizeof(struct tcphdr);
	if (skb->data_end - skb->data < need && skb->len >= need)
		bpf_skb_pull_data(skb, need);
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > end || iph->ihl != 5 || (iph->frag_off & bpf_htons(0x3fff)) || iph->ttl <= 1)
			return -1;
		f->family = AF_INET;
		f->proto = iph->protocol;
		f->tot_len = bpf_ntohs(iph->tot_len);
		mapped(f->src, iph->saddr);
		mapped(f->dst, iph->daddr);
		if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP && f->proto != IPPROTO_ICMP)
			return -1;
		return ports(skb, sizeof(*eth) + sizeof(*iph), f);
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end || ip6->hop_limit <= 1)
			return -1;
		f->family = AF_INET6;
		f->proto = ip6->nexthdr;
		f->tot_len = bpf_ntohs(ip6->payload_len) + sizeof(*ip6);
		__builtin_memcpy(f->src, &ip6->saddr, 16);
		__builtin_memcpy(f->dst, &ip6->daddr, 16);
		if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP && f->proto != IPPROTO_ICMPV6)
			return -1;
		return ports(skb, sizeof(*eth) + sizeof(*ip6), f);
	}
	return -1;
}

static __always_inline struct subnet_info *subnet_of(const __u8 addr[16])
{
	struct lpm_key k = {.prefixlen = 128};
	__builtin_memcpy(k.addr, addr, 16);
	return bpf_map_lookup_elem(&subnets, &k);
}

/*
 * established tells whether conntrack holds f as an established flow that
 * nothing rewrites: no NAT, no helper, no sequence adjustment. TCP needs the
 * handshake seen (ASSURED) and is never a SYN, FIN or RST, so conntrack keeps
 * following how connections start and end; UDP needs a reply seen. The entry's
 * timeout is refreshed, as conntrack would for a packet it saw.
 */
static __always_inline bool established(struct __sk_buff *skb, const struct flow *f)
{
	struct bpf_sock_tuple t = {};
	struct bpf_ct_opts opts = {.netns_id = BPF_F_CURRENT_NETNS, .l4proto = f->proto};
	__u32 size;
	if (f->proto == IPPROTO_TCP && f->tcp_flags)
		return false;
	if (f->family == AF_INET) {
		__builtin_memcpy(&t.ipv4.saddr, f->src + 12, 4);
		__builtin_memcpy(&t.ipv4.daddr, f->dst + 12, 4);
		t.ipv4.sport = f->sport;
		t.ipv4.dport = f->dport;
		size = sizeof(t.ipv4);
	} else {
		__builtin_memcpy(t.ipv6.saddr, f->src, 16);
		__builtin_memcpy(t.ipv6.daddr, f->dst, 16);
		t.ipv6.sport = f->sport;
		t.ipv6.dport = f->dport;
		size = sizeof(t.ipv6);
	}
	struct nf_conn *ct = bpf_skb_ct_lookup(skb, &t, size, &opts, sizeof(opts));
	if (!ct)
		return false;
	unsigned long status = ct->status;
	unsigned long need = f->proto == IPPROTO_TCP ? IPS_ASSURED : IPS_SEEN_REPLY;
	bool ok = (status & need) && !(status & IPS_NOT_FAST);
	if (ok && f->proto == IPPROTO_TCP)
		bpf_ct_change_timeout(ct, tcp_timeout_ms);
	else if (ok && (status & IPS_ASSURED))
		bpf_ct_change_timeout(ct, udp_timeout_ms);
	bpf_ct_release(ct);
	return ok;
}

/* decrement_hops lowers the TTL (and fixes the IPv4 checksum) or hop limit. */
static __always_inline int decrement_hops(struct __sk_buff *skb, __u8 family)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if (family == AF_INET) {
		struct iphdr *iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > end)
			return -1;
		__u32 check = iph->check;
		check += bpf_htons(0x0100);
		iph->check = (__u16)(check + (check >= 0xffff));
		iph->ttl--;
		return 0;
	}
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > end)
		return -1;
	ip6->hop_limit--;
	return 0;
}

static __always_inline int set_macs(struct __sk_buff *skb, const struct bpf_fib_lookup *fib)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	__builtin_memcpy(eth->h_dest, fib->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib->smac, ETH_ALEN);
	return 0;
}

/* forward sends the packet, which arrived on in_if, where the kernel would. */
static __always_inline int forward(struct __sk_buff *skb, const struct flow *f, __u32 in_if)
{
	struct bpf_fib_lookup fib = {
		.family = f->family,
		.l4_protocol = f->proto,
		.sport = f->sport,
		.dport = f->dport,
		.ifindex = in_if,
	};
	if (f->family == AF_INET) {
		__builtin_memcpy(&fib.ipv4_src, f->src + 12, 4);
		__builtin_memcpy(&fib.ipv4_dst, f->dst + 12, 4);
	} else {
		__builtin_memcpy(fib.ipv6_src, f->src, 16);
		__builtin_memcpy(fib.ipv6_dst, f->dst, 16);
	}
	long rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return pass(skb, STAT_PASS_ROUTE, in_if);
	if (decrement_hops(skb, f->family) < 0)
		return pass(skb, STAT_PASS_ROUTE, in_if);
	__u32 oif = fib.ifindex;
	if (rc == BPF_FIB_LKUP_RET_SUCCESS && bpf_map_lookup_elem(&pod_ifs, &oif)) {
		if (set_macs(skb, &fib) < 0)
			return count(STAT_PASS_ROUTE, TC_ACT_SHOT);
		return count(STAT_REDIRECT_PEER, bpf_redirect_peer(oif, 0));
	}
	struct tunnel *t = rc == BPF_FIB_LKUP_RET_SUCCESS ? bpf_map_lookup_elem(&tunnels, &oif) : NULL;
	if (t) {
		int verdict = encap(skb, t, oif, &fib, f);
		if (verdict >= 0)
			return verdict;
	}
	struct bpf_redir_neigh nh = {.nh_family = fib.family};
	if (fib.family == AF_INET)
		nh.ipv4_nh = fib.ipv4_dst;
	else
		__builtin_memcpy(nh.ipv6_nh, fib.ipv6_dst, 16);
	return count(STAT_REDIRECT_NEIGH, bpf_redirect_neigh(oif, &nh, sizeof(nh), 0));
}

SEC("tc")
int estuary_fastpath(struct __sk_buff *skb)
{
	struct flow f = {};
	if (skb->pkt_type != 0 /* PACKET_HOST */ || skb->vlan_present)
		return count(STAT_PASS_OTHER, TC_ACT_UNSPEC);
	/* A decapsulated packet is the tunnel's from here: forwarded as if it
	 * had arrived on it, or handed to it when the stack must see it. */
	__u32 in_if = decap(skb);
	if (in_if == DECAP_BROKEN)
		return count(STAT_PASS_ROUTE, TC_ACT_SHOT);
	if (!in_if)
		in_if = skb->ingress_ifindex;
	if (parse(skb, &f) < 0)
		return pass(skb, STAT_PASS_OTHER, in_if);
	/* Scalars, not the two pointers: the verifier refuses arithmetic on
	 * pointers the compiler may fold a double null test into. */
	__u32 in_src = 0, in_dst = 0, src_flags = 0, dst_flags = 0;
	struct subnet_info *si = subnet_of(f.src);
	if (si) {
		in_src = 1;
		src_flags = si->flags;
	}
	struct subnet_info *di = subnet_of(f.dst);
	if (di) {
		in_dst = 1;
		dst_flags = di->flags;
	}
	if (!(in_src | in_dst))
		return pass(skb, STAT_PASS_OTHER, in_if);
	if (f.proto == IPPROTO_ICMP || f.proto == IPPROTO_ICMPV6) {
		/* ICMP has no conntrack lookup here, so nothing tells whether
		 * policy would let an echo through: with policy enforced, all
		 * of it takes the stack (echo_to_stack). Otherwise echoes are never rewritten
		 * between cluster addresses; out of the cluster only the source
		 * NAT of a natOutgoing subnet would rewrite them, so an echo
		 * leaving such a subnet takes the stack. So does one coming into
		 * it from outside (a node's own address, say): its reply will
		 * take the stack, and conntrack must have seen the request, or
		 * it drops the reply as invalid. Errors carry headers NAT
		 * rewrites: the stack's. */
		if (!f.echo || echo_via_stack(f.echo) || (!in_dst && (src_flags & SUBNET_NAT_OUTGOING)) ||
		    (!in_src && (dst_flags & SUBNET_NAT_OUTGOING)))
			return pass(skb, STAT_PASS_CONNTRACK, in_if);
	} else if (!established(skb, &f)) {
		return pass(skb, STAT_PASS_CONNTRACK, in_if);
	}
	return forward(skb, &f, in_if);
}

char _license[] SEC("license") = "Dual BSD/GPL";
