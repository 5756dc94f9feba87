// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The overlay's VXLAN encapsulation and decapsulation, done by the fast path
 * itself in the wire format of the node's VXLAN device, so either end may be
 * the kernel's device. Included by fastpath.c; the design (what is done here,
 * what is left to the device, and why) is in ../fastpath.go.
 */
#ifndef ESTUARY_VXLAN_H
#define ESTUARY_VXLAN_H

#define VXLAN_FLAG_VNI 0x08000000 /* the I flag: a VNI is present */
#define VXLAN_OUTER_LEN (sizeof(struct iphdr) + sizeof(struct udphdr) + sizeof(struct vxlanhdr) + sizeof(struct ethhdr))
#define VXLAN_SPORT_LOW 32768 /* the kernel's default local port range */
#define VXLAN_SPORT_HIGH 61000
#define VXLAN_TTL 64

#define DECAP_BROKEN 0xffffffff

#define ECN_MASK 3
#define ECN_CE 3
#define ECN_ECT_0 2

#ifndef BPF_F_ADJ_ROOM_DECAP_L3_IPV6
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)
#endif

struct vxlanhdr {
	__be32 flags;
	__be32 vni; /* VNI << 8 */
};

/* A VXLAN device of the node, by ifindex. */
struct tunnel {
	__be32 local;  /* its IPv4 VTEP address: the outer source */
	__u32 vni;
	__u32 parent;  /* ifindex of the device it sends through */
	__u32 mtu;     /* its MTU: the largest inner packet */
	__be16 port;   /* UDP destination port */
	__u8 mac[6];   /* its MAC: the inner destination of packets for it */
};

/* A remote VTEP: the tunnel's ifindex and the remote device's MAC. */
struct vtep_key {
	__u32 ifindex;
	__u8 mac[6];
	__u16 pad;
};

struct vtep {
	__be32 ip;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct tunnel);
} tunnels SEC(".maps");

/* VNI to the tunnel's ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} tunnel_vnis SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct vtep_key);
	__type(value, struct vtep);
} vteps SEC(".maps");

static __always_inline __u16 csum_fold32(__u32 c)
{
	c = (c & 0xffff) + (c >> 16);
	c = (c & 0xffff) + (c >> 16);
	return (__u16)~c;
}

static __always_inline bool same_mac(const __u8 *a, const __u8 *b)
{
	__u8 diff = 0;
#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++)
		diff |= a[i] ^ b[i];
	return !diff;
}

/* The headers of a VXLAN frame, from the start of the skb's data. */
struct vxlan_frame {
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *uh;
	struct vxlanhdr *vx;
	struct ethhdr *inner;
};

/* vxlan_frame points f at the skb's headers; false when they are not all in
 * its linear data. */
static __always_inline bool vxlan_frame(struct __sk_buff *skb, struct vxlan_frame *f)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	f->eth = data;
	f->iph = (void *)(f->eth + 1);
	f->uh = (void *)(f->iph + 1);
	f->vx = (void *)(f->uh + 1);
	f->inner = (void *)(f->vx + 1);
	return (void *)(f->inner + 1) <= end;
}

/* inner_ecn is the ECN field of the frame's IP header (at ETH_HLEN). */
static __always_inline __u8 inner_ecn(struct __sk_buff *skb, __u8 family)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (family == AF_INET) {
		struct iphdr *iph = data + sizeof(struct ethhdr);
		return (void *)(iph + 1) > end ? 0 : iph->tos & ECN_MASK;
	}
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	return (void *)(ip6 + 1) > end ? 0 : (ip6->flow_lbl[0] >> 4) & ECN_MASK;
}

/*
 * encap wraps the frame for the remote pod behind fib (resolved on the
 * tunnel t, ifindex oif) and sends it out of the underlay device. It returns
 * -1, with the frame untouched, when the fast path cannot: an unknown VTEP,
 * an underlay route without a resolved neighbour, or a packet too large for
 * the tunnel (the device then fragments or refuses it as it always has).
 */
static __always_inline int encap(struct __sk_buff *skb, const struct tunnel *t, __u32 oif,
				 const struct bpf_fib_lookup *fib, const struct flow *f)
{
	struct vtep_key k = {.ifindex = oif};
	__builtin_memcpy(k.mac, fib->dmac, ETH_ALEN);
	struct vtep *v = bpf_map_lookup_elem(&vteps, &k);
	if (!v)
		return -1;
	__u32 l3 = f->family == AF_INET ? sizeof(struct iphdr) : sizeof(struct ipv6hdr);
	if (skb->gso_size ? skb->gso_size + l3 + sizeof(struct tcphdr) > t->mtu : skb->len - sizeof(struct ethhdr) > t->mtu)
		return -1;
	if (skb->len - sizeof(struct ethhdr) + VXLAN_OUTER_LEN > 0xffff)
		return -1;
	struct bpf_fib_lookup o = {
		.family = AF_INET,
		.l4_protocol = IPPROTO_UDP,
		.ifindex = t->parent,
		.ipv4_src = t->local,
		.ipv4_dst = v->ip,
	};
	if (bpf_fib_lookup(skb, &o, sizeof(o), BPF_FIB_LOOKUP_OUTPUT) != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	__u8 ecn = inner_ecn(skb, f->family);
	__u16 inner_proto = f->family == AF_INET ? bpf_htons(ETH_P_IP) : bpf_htons(ETH_P_IPV6);
	__u32 hash = bpf_get_hash_recalc(skb);
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
		      BPF_F_ADJ_ROOM_ENCAP_L2_ETH | BPF_F_ADJ_ROOM_ENCAP_L2(sizeof(struct ethhdr));
	if (bpf_skb_adjust_room(skb, VXLAN_OUTER_LEN, BPF_ADJ_ROOM_MAC, flags))
		return -1;

	struct vxlan_frame fr;
	if (!vxlan_frame(skb, &fr))
		return count(STAT_PASS_ROUTE, TC_ACT_SHOT);
	struct ethhdr *eth = fr.eth, *inner = fr.inner;
	struct iphdr *iph = fr.iph;
	struct udphdr *uh = fr.uh;
	struct vxlanhdr *vx = fr.vx;
	__builtin_memcpy(eth->h_dest, o.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, o.smac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	__u16 tot = skb->len - sizeof(struct ethhdr);
	iph->version = 4;
	iph->ihl = 5;
	iph->tos = ecn == ECN_CE ? ECN_ECT_0 : ecn; /* RFC 6040 */
	iph->tot_len = bpf_htons(tot);
	iph->id = (__u16)bpf_get_prandom_u32();
	iph->frag_off = 0;
	iph->ttl = VXLAN_TTL;
	iph->protocol = IPPROTO_UDP;
	iph->check = 0;
	iph->saddr = t->local;
	iph->daddr = v->ip;
	__u32 sum = 0;
	__u16 *w = (void *)iph;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(*iph) / 2); i++)
		sum += w[i];
	iph->check = csum_fold32(sum);

	uh->source = bpf_htons(VXLAN_SPORT_LOW + (__u16)(((__u64)hash * (VXLAN_SPORT_HIGH - VXLAN_SPORT_LOW)) >> 32));
	uh->dest = t->port;
	uh->len = bpf_htons(tot - sizeof(*iph));
	uh->check = 0;
	vx->flags = bpf_htonl(VXLAN_FLAG_VNI);
	vx->vni = bpf_htonl(t->vni << 8);
	__builtin_memcpy(inner->h_dest, fib->dmac, ETH_ALEN);
	__builtin_memcpy(inner->h_source, t->mac, ETH_ALEN);
	inner->h_proto = inner_proto;
	return count(STAT_ENCAP, bpf_redirect(o.ifindex, 0));
}

/*
 * decap takes the outer headers off a VXLAN packet for one of the node's
 * tunnels and returns the tunnel's ifindex (DECAP_BROKEN if the frame could
 * not be rebuilt: drop it), or 0 when the packet is not one the fast path
 * decapsulates (left, untouched, to the device): not for a tunnel of the
 * node, not arriving on the tunnel's parent, from an address that is not the
 * VTEP of the MAC it carries, marked CE, not unicast to the tunnel's MAC, or
 * a GSO aggregate.
 * GRO aggregates stay with the device: only it resets the skb's tunnel GSO
 * state, and a decapsulated aggregate keeping it would be segmented wrongly
 * if a pod forwarded it (bpf_skb_adjust_room cannot clear it before
 * BPF_F_ADJ_ROOM_DECAP_L4_UDP).
 */
static __always_inline __u32 decap(struct __sk_buff *skb)
{
	const __u32 need = sizeof(struct ethhdr) + VXLAN_OUTER_LEN + sizeof(struct ipv6hdr);
	if (skb->protocol != bpf_htons(ETH_P_IP) || skb->gso_size)
		return 0;
	if (skb->data_end - skb->data < need && skb->len >= need)
		bpf_skb_pull_data(skb, need);
	struct vxlan_frame fr;
	if (!vxlan_frame(skb, &fr))
		return 0;
	struct ethhdr *eth = fr.eth, *inner = fr.inner;
	struct iphdr *iph = fr.iph;
	struct udphdr *uh = fr.uh;
	struct vxlanhdr *vx = fr.vx;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->ihl != 5 || iph->protocol != IPPROTO_UDP ||
	    (iph->frag_off & bpf_htons(0x3fff)) || (iph->tos & ECN_MASK) == ECN_CE ||
	    vx->flags != bpf_htonl(VXLAN_FLAG_VNI))
		return 0;
	__u32 vni = bpf_ntohl(vx->vni) >> 8;
	__u32 *ifp = bpf_map_lookup_elem(&tunnel_vnis, &vni);
	if (!ifp)
		return 0;
	__u32 ifindex = *ifp;
	struct tunnel *t = bpf_map_lookup_elem(&tunnels, &ifindex);
	if (!t || t->port != uh->dest || t->local != iph->daddr || t->parent != skb->ingress_ifindex)
		return 0;
	struct vtep_key k = {.ifindex = ifindex};
	__builtin_memcpy(k.mac, inner->h_source, ETH_ALEN);
	struct vtep *v = bpf_map_lookup_elem(&vteps, &k);
	if (!v || v->ip != iph->saddr)
		return 0;
	if (!same_mac(inner->h_dest, t->mac))
		return 0;
	__u8 dst[ETH_ALEN], src[ETH_ALEN];
	__builtin_memcpy(dst, inner->h_dest, ETH_ALEN);
	__builtin_memcpy(src, inner->h_source, ETH_ALEN);
	__u16 proto = inner->h_proto;
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO;
	if (proto == bpf_htons(ETH_P_IPV6))
		flags |= BPF_F_ADJ_ROOM_DECAP_L3_IPV6;
	else if (proto != bpf_htons(ETH_P_IP))
		return 0;
	if (bpf_skb_adjust_room(skb, -(__s32)VXLAN_OUTER_LEN, BPF_ADJ_ROOM_MAC, flags))
		return 0;
	/* A checksum the NIC vouched for covered the outer packet. */
	bpf_csum_level(skb, BPF_CSUM_LEVEL_RESET);
	eth = (void *)(long)skb->data;
	if ((void *)(eth + 1) > (void *)(long)skb->data_end)
		return DECAP_BROKEN;
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	eth->h_proto = proto;
	count(STAT_DECAP, 0);
	return ifindex;
}

#endif
