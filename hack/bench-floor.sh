#!/usr/bin/env bash
# bench-floor.sh measures what the kernel itself costs on this machine for the
# two hops estuary's data path cannot avoid, with no Kubernetes, no estuary
# and no netfilter at all, and prints a markdown table for docs/benchmarks.md.
#
# It builds, in private network namespaces, the lab's shape: a switch (a
# bridge), two nodes and a router on it, an external host behind the router.
#   - underlay floor: a pod behind node-1 on a plain veth pair, its /32 routed
#     by the node, the node answering ARP for it (proxy ARP), the address in a
#     subnet the router has on the switch; pod -> external host vs
#     node-1 -> external host (both cross the switch and the router).
#   - overlay floor: a pod behind each node, a kernel VXLAN device on each
#     node (VNI 4, port 8472, static FDB and neighbour entries, nothing
#     learned); pod on node-1 -> pod on node-2 vs node-1 -> node-2.
#   - a BPF tunnel floor (when clang-14 is installed): the same two pods over
#     hack/floor/gro-decap.c, a tc program pair that encapsulates and
#     decapsulates VXLAN itself, GRO aggregates included, with every address
#     compiled in and nothing checked. Decapsulating aggregates so is unsafe
#     on Linux 6.18 (see that file), which is why estuary's fast path leaves
#     them to the device; it bounds what any overlay could reach here.
# ROUNDS times in alternation: iperf3 TCP (10 s) and ping RTT (200 pings 0.01 s
# apart; a pod's and its reference's at the same time, so both see the same
# load) for each path; medians and ratios are printed. These ratios are
# the ceiling of any CNI that routes its pods through the host (a veth pair)
# or carries them in the kernel's VXLAN on this machine: the lab's numbers
# (bench-underlay.sh, bench-overlay.sh) add kube-proxy's netfilter and
# estuary's policy routing on top.
#
# Needs root, iproute2, iperf3, ping, jq and bc; touches no namespace but its own.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
P="estfloor$$"

die() { echo "bench-floor: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (it makes network namespaces)"
for tool in ip bridge iperf3 ping jq bc; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh

NS=(sw n1 n2 rt ext pu p1 p2)
BPFDIR=
cleanup() {
  local n
  for n in "${NS[@]}"; do ip netns del "$P-$n" 2>/dev/null || true; done
  [ -z "$BPFDIR" ] || rm -rf "$BPFDIR"
}
trap cleanup EXIT

x() { local n=$1; shift; ip netns exec "$P-$n" "$@"; }
mac() { ip -n "$P-$1" -br link show "$2" | awk '{print $3}'; }

# port NS ADDR: NS's eth0 on the switch with ADDR.
port() {
  ip link add eth0 netns "$P-$1" type veth peer name "$1" netns "$P-sw"
  ip -n "$P-sw" link set "$1" master br0 up
  ip -n "$P-$1" addr add "$2" dev eth0
  ip -n "$P-$1" link set eth0 up
}

# pod POD NODE HOSTIF ADDR MTU: POD behind NODE on a veth pair, ADDR/32 routed
# by the node, the pod's default route through 169.254.1.1 (the host side).
pod() {
  local p=$1 n=$2 hif=$3 addr=$4 mtu=$5
  ip link add eth0 netns "$P-$p" type veth peer name "$hif" netns "$P-$n"
  ip -n "$P-$p" addr add "$addr/32" dev eth0
  ip -n "$P-$p" link set eth0 mtu "$mtu" up
  ip -n "$P-$n" link set "$hif" up
  ip -n "$P-$n" route add "$addr/32" dev "$hif"
  ip -n "$P-$p" route add 169.254.1.1 dev eth0
  ip -n "$P-$p" route add default via 169.254.1.1 dev eth0
  ip -n "$P-$p" neigh replace 169.254.1.1 lladdr "$(mac "$n" "$hif")" dev eth0 nud permanent
}

# vxlan NODE LOCAL REMOTE LOCALPOD REMOTEPOD MYMAC PEERMAC: the node's VXLAN
# device, the remote pod's /24 through it, static neighbour and FDB entries.
vxlan() {
  local n=$1 local=$2 remote=$3 mine=$4 theirs=$5 mymac=$6 peermac=$7
  ip -n "$P-$n" link add vx type vxlan id 4 dstport 8472 local "$local" dev eth0 nolearning
  ip -n "$P-$n" link set vx address "$mymac" up
  ip -n "$P-$n" addr add "$mine/32" dev vx
  ip -n "$P-$n" route add "$theirs/24" via "$theirs" dev vx onlink
  ip -n "$P-$n" neigh add "$theirs" lladdr "$peermac" dev vx
  bridge -n "$P-$n" fdb append "$peermac" dev vx dst "$remote"
}

build() {
  local n
  for n in "${NS[@]}"; do
    ip netns add "$P-$n"
    ip -n "$P-$n" link set lo up
  done
  ip -n "$P-sw" link add br0 type bridge
  ip -n "$P-sw" link set br0 up
  port rt 192.168.50.1/24
  port n1 192.168.50.11/24
  port n2 192.168.50.12/24
  ip -n "$P-rt" addr add 10.77.100.1/24 dev eth0
  ip link add ext0 netns "$P-rt" type veth peer name eth0 netns "$P-ext"
  ip -n "$P-rt" addr add 172.30.0.1/24 dev ext0
  ip -n "$P-rt" link set ext0 up
  ip -n "$P-ext" addr add 172.30.0.10/24 dev eth0
  ip -n "$P-ext" link set eth0 up
  ip -n "$P-ext" route add default via 172.30.0.1
  for n in rt n1 n2; do x "$n" sysctl -qw net.ipv4.ip_forward=1; done
  for n in n1 n2; do ip -n "$P-$n" route add default via 192.168.50.1; done
  pod pu n1 vu 10.77.100.10 1500
  x n1 sysctl -qw net.ipv4.conf.eth0.proxy_arp=1
  pod p1 n1 vp 10.244.1.10 1450
  pod p2 n2 vp 10.244.2.10 1450
  vxlan n1 192.168.50.11 192.168.50.12 10.244.1.0 10.244.2.0 02:00:00:00:01:01 02:00:00:00:01:02
  vxlan n2 192.168.50.12 192.168.50.11 10.244.2.0 10.244.1.0 02:00:00:00:01:02 02:00:00:00:01:01
}

ifindex() { ip -n "$P-$1" -j link show "$2" | jq '.[0].ifindex'; }
cmac() { mac "$1" "$2" | sed 's/^/0x/; s/:/,0x/g'; }
ipnum() { local a b c d; IFS=. read -r a b c d <<<"$1"; echo $(((a << 24) | (b << 16) | (c << 8) | d)); }

# bpf_tunnel_build: compile hack/floor/gro-decap.c for each node's two ends
# into $BPFDIR; false without clang-14.
bpf_tunnel_build() {
  command -v clang-14 >/dev/null || return 1
  BPFDIR=$(mktemp -d /tmp/estfloor-bpf.XXXXXX)
  local cc=(clang-14 -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c hack/floor/gro-decap.c)
  local n p peer i
  for i in 1 2; do
    n=n$i p=p$i peer=n$((3 - i))
    "${cc[@]}" -o "$BPFDIR/enc-$n.o" -DENCAP -DLOCAL_IP="$(ipnum 192.168.50.1$i)" -DREMOTE_IP="$(ipnum 192.168.50.1$((3 - i)))" \
      -DPOD_NET="$(ipnum 10.244.$((3 - i)).0)" -DPOD_MASK=0xffffff00 -DOUT_IFINDEX="$(ifindex "$n" eth0)" \
      -DSMAC="$(cmac "$n" eth0)" -DDMAC="$(cmac "$peer" eth0)"
    "${cc[@]}" -o "$BPFDIR/dec-$n.o" -DPOD_NET="$(ipnum 10.244.$i.0)" -DPOD_MASK=0xffffff00 \
      -DPEER_IFINDEX="$(ifindex "$n" vp)" -DSMAC="$(cmac "$n" vp)" -DDMAC="$(cmac "$p" eth0)"
  done
}

# bpf_tunnel on|off: the floor programs on both nodes' pod veth and uplink.
bpf_tunnel() {
  local n
  for n in n1 n2; do
    if [ "$1" = on ]; then
      x "$n" tc qdisc replace dev vp clsact
      x "$n" tc qdisc replace dev eth0 clsact
      x "$n" tc filter replace dev vp ingress pref 1 handle 1 bpf da obj "$BPFDIR/enc-$n.o" sec tc
      x "$n" tc filter replace dev eth0 ingress pref 1 handle 1 bpf da obj "$BPFDIR/dec-$n.o" sec tc
    else
      x "$n" tc filter del dev vp ingress pref 1
      x "$n" tc filter del dev eth0 ingress pref 1
    fi
  done
}

# tput CLIENT SERVER DST: iperf3 TCP, 10 s, in Gbit/s.
tput() {
  local srv srv_ns=$2
  x "$srv_ns" timeout 60 iperf3 -s -1 >/dev/null 2>&1 &
  srv=$!
  listening() { x "$srv_ns" ss -Hltn 'sport = :5201' | grep -q 5201; }
  wait_until "iperf3 server in $srv_ns" 30 listening
  x "$1" iperf3 -c "$3" -t 10 -J | jq '.end.sum_received.bits_per_second / 1e9 * 100 | round / 100'
  wait "$srv" || true
}
rtt() { x "$1" ping -c 200 -i 0.01 -q "$2" | awk -F'/' '/^(rtt|round-trip)/ {print $5}'; }
# rtt_pair NS1 DST1 NS2 DST2: both at the same time (the same load); "RTT1 RTT2".
rtt_pair() { run_pair 3 rtt "$1" "$2" rtt "$3" "$4"; }

build
for pair in "pu 172.30.0.10" "p1 10.244.2.10" "n1 172.30.0.10" "n1 192.168.50.12"; do
  read -r from to <<<"$pair"
  x "$from" ping -c 1 -W 2 -q "$to" >/dev/null || die "$from cannot reach $to: topology broken"
done

BT=() BR=() BM=()
HAVE_BPF=
if bpf_tunnel_build; then
  HAVE_BPF=1
else
  echo "bench-floor: clang-14 not found; no BPF tunnel floor" >&2
fi

UT=() NT=() OT=() MT=() UR=() NR=() OR=() MR=()
for ((i = 1; i <= ROUNDS; i++)); do
  UT+=("$(tput pu ext 172.30.0.10)")
  NT+=("$(tput n1 ext 172.30.0.10)")
  OT+=("$(tput p1 p2 10.244.2.10)")
  MT+=("$(tput n1 n2 192.168.50.12)")
  read -r a b < <(rtt_pair pu 172.30.0.10 n1 172.30.0.10)
  UR+=("$a") NR+=("$b")
  read -r a b < <(rtt_pair p1 10.244.2.10 n1 192.168.50.12)
  OR+=("$a") MR+=("$b")
  if [ -n "$HAVE_BPF" ]; then
    bpf_tunnel on
    BT+=("$(tput p1 p2 10.244.2.10)")
    read -r a b < <(rtt_pair p1 10.244.2.10 n1 192.168.50.12)
    BR+=("$a") BM+=("$b")
    bpf_tunnel off
  fi
  echo "bench-floor: round $i: veth pod->ext ${UT[-1]} node->ext ${NT[-1]}, vxlan pod->pod ${OT[-1]} node->node ${MT[-1]} Gbit/s; rtt ${UR[-1]}/${NR[-1]}, ${OR[-1]}/${MR[-1]} ms${HAVE_BPF:+; bpf tunnel ${BT[-1]} Gbit/s ${BR[-1]} ms}" >&2
done

row() { # label pods nodes
  local -n a=$2 b=$3
  local ma mb
  ma=$(median "${a[@]}") mb=$(median "${b[@]}")
  echo "| $1 | $ma (${a[*]}) | $mb (${b[*]}) | $(ratio "$ma" "$mb") | $(round_ratios "$2" "$3") |"
}
cat <<MD

### the kernel floor (no Kubernetes, no estuary, no netfilter)

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), load average at the end
$(cut -d' ' -f1-3 /proc/loadavg). Command: \`ROUNDS=$ROUNDS hack/bench-floor.sh\`. Medians of $ROUNDS alternating rounds.

| what | pod | node | pod/node (of the medians) | pod/node per round (median) |
| --- | --- | --- | --- | --- |
$(row "iperf3 TCP to the external host (Gbit/s): pod on a routed veth pair vs its node" UT NT)
$(row "ping RTT to the external host (ms): pod on a routed veth pair vs its node" UR NR)
$(row "iperf3 TCP (Gbit/s): pod to pod over kernel VXLAN vs node to node" OT MT)
$(row "ping RTT (ms): pod to pod over kernel VXLAN vs node to node" OR MR)
MD
if [ -n "$HAVE_BPF" ]; then
  row "iperf3 TCP (Gbit/s): pod to pod over the BPF tunnel floor vs node to node" BT MT
  row "ping RTT (ms): pod to pod over the BPF tunnel floor vs node to node" BR BM
fi
