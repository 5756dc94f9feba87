#!/usr/bin/env bash
# bench-overlay.sh measures the overlay's data path on an estuary lab and prints
# a markdown table ready for docs/benchmarks.md. A pod on node-1 and a pod on
# node-2; in the same run, ROUNDS times in alternation: iperf3 TCP (10 s) from
# pod to pod and from node-1 to node-2, and ping RTT (200 pings 0.01 s apart)
# the same two ways at the same time (so both see the same load on the
# machine). Medians and pod/node ratios are printed.
#
# With FASTPATH_AB=1 each round also measures the pods with the daemon's fast
# path off (--fast-path=false, the DaemonSet rolled), so the table shows the
# overlay with and without it against the same node-to-node reference.
#
# Uses the lab at ESTUARY_LAB_STATE when one runs there with --cni estuary, else
# brings one up (and down at the end). Needs root, iperf3, ping, jq and bc.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
FASTPATH_AB=${FASTPATH_AB:-}

die() { echo "bench-overlay: $*" >&2; exit 1; }
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh
bench_setup
estuary_lab

cleanup() {
  [ -z "$FASTPATH_AB" ] || fast_path true >/dev/null 2>&1 || true
  kubectl delete pod ovl-a ovl-b --ignore-not-found --wait=true >/dev/null 2>&1 || true
  if [ -n "$OWN_LAB" ]; then "${LAB[@]}" down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

pod_pair ovl-a ovl-b
pid_a=$PID_A pid_b=$PID_B ip_b=$IP_B
node2=$(node_address node-2)

PT=() NT=() PR=() NR=() OT=() OR=() ON=()
for ((i = 1; i <= ROUNDS; i++)); do
  if [ -n "$FASTPATH_AB" ]; then
    fast_path false
    OT+=("$(iperf_between node-2 "$pid_b" node-1 "$pid_a" "$ip_b")")
    read -r pr nr < <(ping_pair node-1 "$pid_a" "$ip_b" node-1 "" "$node2")
    OR+=("$pr") ON+=("$nr")
    fast_path true
  fi
  PT+=("$(iperf_between node-2 "$pid_b" node-1 "$pid_a" "$ip_b")")
  NT+=("$(iperf_between node-2 "" node-1 "" "$node2")")
  read -r pr nr < <(ping_pair node-1 "$pid_a" "$ip_b" node-1 "" "$node2")
  PR+=("$pr") NR+=("$nr")
  echo "bench-overlay: round $i: pod ${PT[-1]} node ${NT[-1]} Gbit/s; RTT pod ${PR[-1]} node ${NR[-1]} ms${FASTPATH_AB:+; fast path off: ${OT[-1]} Gbit/s ${OR[-1]} ms}" >&2
done

mpt=$(median "${PT[@]}") mnt=$(median "${NT[@]}") mpr=$(median "${PR[@]}") mnr=$(median "${NR[@]}")
cat <<MD

### Overlay pod to pod on the lab

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes,
load average at the end $(cut -d' ' -f1-3 /proc/loadavg). Command: \`ROUNDS=$ROUNDS${FASTPATH_AB:+ FASTPATH_AB=1} hack/bench-overlay.sh\`.
Medians of $ROUNDS alternating rounds.

| what | pod on node-1 to pod on node-2 | node-1 to node-2 | pod/node (of the medians) | pod/node per round (median) |
| --- | --- | --- | --- | --- |
| iperf3 TCP, 10 s (Gbit/s) | $mpt (${PT[*]}) | $mnt (${NT[*]}) | $(ratio "$mpt" "$mnt") | $(round_ratios PT NT) |
| ping RTT, average (ms) | $mpr (${PR[*]}) | $mnr (${NR[*]}) | $(ratio "$mpr" "$mnr") | $(round_ratios PR NR) |
MD
if [ -n "$FASTPATH_AB" ]; then
  mot=$(median "${OT[@]}") mor=$(median "${OR[@]}") mon=$(median "${ON[@]}")
  cat <<MD
| iperf3 TCP, fast path off (Gbit/s) | $mot (${OT[*]}) | $mnt | $(ratio "$mot" "$mnt") | $(round_ratios OT NT) |
| ping RTT, fast path off (ms) | $mor (${OR[*]}) | $mon (${ON[*]}) | $(ratio "$mor" "$mon") | $(round_ratios OR ON) |
MD
fi
