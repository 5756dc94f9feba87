#!/usr/bin/env bash
# bench-ipv6.sh measures estuary's overlay over IPv6 against IPv4 on one
# dual-stack lab and prints a markdown table ready for docs/benchmarks.md. A
# dual-stack pod on node-1 and one on node-2; in the same run, ROUNDS times in
# alternation: iperf3 TCP (10 s) pod to pod over IPv4, then over IPv6, then
# node-1 to node-2 over each family (the reference), and ping RTT (200 pings
# 0.01 s apart) pod to pod over IPv4 and IPv6 at the same time, then node to
# node likewise. Medians and IPv6/IPv4 ratios (of the medians and per round).
#
# Uses the lab at ESTUARY_LAB_STATE when a dual-stack estuary lab runs there,
# else brings one up (--ip-family dual) and down at the end. Needs root,
# iperf3, ping, jq and bc.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}

die() { echo "bench-ipv6: $*" >&2; exit 1; }
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh
bench_setup
estuary_lab dual

cleanup() {
  kubectl delete pod v6-a v6-b --ignore-not-found --wait=true >/dev/null 2>&1 || true
  if [ -n "$OWN_LAB" ]; then "${LAB[@]}" down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

pod_pair v6-a v6-b
pid_a=$PID_A pid_b=$PID_B ip_b=$IP_B ip6_b=$IP6_B
[ -n "$ip6_b" ] || die "pod v6-b has no IPv6 address (podIPs: $(kubectl get pod v6-b -o jsonpath='{.status.podIPs}'))"
node2=$(node_address node-2) node2v6=$(node_address6 node-2)

T4=() T6=() N4=() N6=() R4=() R6=() M4=() M6=()
for ((i = 1; i <= ROUNDS; i++)); do
  T4+=("$(iperf_between node-2 "$pid_b" node-1 "$pid_a" "$ip_b")")
  T6+=("$(iperf_between node-2 "$pid_b" node-1 "$pid_a" "$ip6_b")")
  N4+=("$(iperf_between node-2 "" node-1 "" "$node2")")
  N6+=("$(iperf_between node-2 "" node-1 "" "$node2v6")")
  read -r r4 r6 < <(ping_pair node-1 "$pid_a" "$ip_b" node-1 "$pid_a" "$ip6_b")
  R4+=("$r4") R6+=("$r6")
  read -r m4 m6 < <(ping_pair node-1 "" "$node2" node-1 "" "$node2v6")
  M4+=("$m4") M6+=("$m6")
  echo "bench-ipv6: round $i: pod IPv4 ${T4[-1]} IPv6 ${T6[-1]} Gbit/s, node IPv4 ${N4[-1]} IPv6 ${N6[-1]} Gbit/s; RTT pod ${R4[-1]}/${R6[-1]} node ${M4[-1]}/${M6[-1]} ms" >&2
done

m() { median "$@"; }
t4=$(m "${T4[@]}") t6=$(m "${T6[@]}") n4=$(m "${N4[@]}") n6=$(m "${N6[@]}")
r4=$(m "${R4[@]}") r6=$(m "${R6[@]}") m4=$(m "${M4[@]}") m6=$(m "${M6[@]}")
cat <<MD

### IPv6 against IPv4 on a dual-stack lab

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes,
load average at the end $(cut -d' ' -f1-3 /proc/loadavg). Command: \`ROUNDS=$ROUNDS hack/bench-ipv6.sh\`.
Medians of $ROUNDS alternating rounds; pods of the default network (overlay-v4 and
overlay-v6 over one VXLAN device with an IPv4 VTEP).

| what | IPv4 | IPv6 | IPv6/IPv4 (of the medians) | IPv6/IPv4 per round (median) |
| --- | --- | --- | --- | --- |
| iperf3 TCP 10 s, pod on node-1 to pod on node-2 (Gbit/s) | $t4 (${T4[*]}) | $t6 (${T6[*]}) | $(ratio "$t6" "$t4") | $(round_ratios T6 T4) |
| iperf3 TCP 10 s, node-1 to node-2 (Gbit/s) | $n4 (${N4[*]}) | $n6 (${N6[*]}) | $(ratio "$n6" "$n4") | $(round_ratios N6 N4) |
| ping RTT average, pod to pod (ms) | $r4 (${R4[*]}) | $r6 (${R6[*]}) | $(ratio "$r6" "$r4") | $(round_ratios R6 R4) |
| ping RTT average, node to node (ms) | $m4 (${M4[*]}) | $m6 (${M6[*]}) | $(ratio "$m6" "$m4") | $(round_ratios M6 M4) |
MD
