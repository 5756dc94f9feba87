// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * A measuring device for hack/bench-floor.sh, not part of estuary: the
 * fastest VXLAN a tc program can do between two nodes, with every address
 * compiled in (-D flags) and nothing checked. Built with -DENCAP it wraps
 * every IPv4 packet for POD_NET/POD_MASK and sends it out of OUT_IFINDEX;
 * without, it unwraps every VXLAN packet for a pod in POD_NET, GRO
 * aggregates included, and puts it into the pod (bpf_redirect_peer).
 *
 * Decapsulating aggregates this way is what estuary's fast path does not
 * do on Linux 6.18: bpf_skb_adjust_room leaves the skb's UDP-tunnel GSO
 * state behind, which breaks the packet's segmentation if the pod forwards
 * it. The floor script uses it only to bound what any overlay could reach
 * on this machine.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct vxlanhdr {
	__be32 flags;
	__be32 vni;
};

#define OUTER (sizeof(struct iphdr) + sizeof(struct udphdr) + sizeof(struct vxlanhdr) + sizeof(struct ethhdr))

static const __u8 smac[ETH_ALEN] = {SMAC};
static const __u8 dmac[ETH_ALEN] = {DMAC};

#ifdef ENCAP
SEC("tc")
int floor_encap(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    (ip->daddr & bpf_htonl(POD_MASK)) != bpf_htonl(POD_NET))
		return TC_ACT_OK;
	__u32 hash = bpf_get_hash_recalc(skb);
	__u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
		      BPF_F_ADJ_ROOM_ENCAP_L2_ETH | BPF_F_ADJ_ROOM_ENCAP_L2(sizeof(struct ethhdr));
	if (bpf_skb_adjust_room(skb, OUTER, BPF_ADJ_ROOM_MAC, flags))
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	struct iphdr *o = (void *)(eth + 1);
	struct udphdr *u = (void *)(o + 1);
	struct vxlanhdr *v = (void *)(u + 1);
	struct ethhdr *in = (void *)(v + 1);
	if ((void *)(in + 1) > end)
		return TC_ACT_SHOT;
	__builtin_memcpy(eth->h_source, smac, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, dmac, ETH_ALEN);
	__u16 tot = skb->len - sizeof(*eth);
	*o = (struct iphdr){.version = 4, .ihl = 5, .tot_len = bpf_htons(tot), .ttl = 64, .protocol = IPPROTO_UDP,
			    .saddr = bpf_htonl(LOCAL_IP), .daddr = bpf_htonl(REMOTE_IP)};
	__u32 sum = 0;
	__u16 *w = (void *)o;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	o->check = (__u16)~sum;
	*u = (struct udphdr){.source = bpf_htons(32768 + hash % 28232), .dest = bpf_htons(8472),
			     .len = bpf_htons(tot - sizeof(*o))};
	*v = (struct vxlanhdr){.flags = bpf_htonl(0x08000000), .vni = bpf_htonl(4 << 8)};
	__builtin_memcpy(in->h_source, smac, ETH_ALEN);
	__builtin_memcpy(in->h_dest, dmac, ETH_ALEN);
	in->h_proto = bpf_htons(ETH_P_IP);
	return bpf_redirect(OUT_IFINDEX, 0);
}
#else
SEC("tc")
int floor_decap(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *o = (void *)(eth + 1);
	struct udphdr *u = (void *)(o + 1);
	struct vxlanhdr *v = (void *)(u + 1);
	struct ethhdr *in = (void *)(v + 1);
	struct iphdr *ip = (void *)(in + 1);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || o->ihl != 5 ||
	    o->protocol != IPPROTO_UDP || u->dest != bpf_htons(8472) ||
	    (ip->daddr & bpf_htonl(POD_MASK)) != bpf_htonl(POD_NET))
		return TC_ACT_OK;
	if (bpf_skb_adjust_room(skb, -(__s32)OUTER, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO))
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_SHOT;
	__builtin_memcpy(eth->h_source, smac, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, dmac, ETH_ALEN);
	return bpf_redirect_peer(PEER_IFINDEX, 0);
}
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";
