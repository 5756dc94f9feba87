#!/usr/bin/env bash
# bench-underlay.sh measures the untagged VLAN underlay on an estuary lab and
# prints a markdown table ready for docs/benchmarks.md. In the same run, ROUNDS
# times in alternation:
#   - iperf3 TCP (10 s) and ping RTT (200 pings 0.01 s apart) from an underlay
#     pod on node-1 to the external host, and from node-1 itself to the external
#     host (both cross the switch and the router; the two pings run at the
#     same time, so both see the same load on the machine);
#   - iperf3 TCP from an overlay pod on node-3 to the underlay pod on node-1,
#     and from node-3 to node-1.
# Medians and ratios are printed. The underlay network is the e2e suite's: rack1,
# mode VLAN, netID 0, subnet 10.77.100.0/24 with the router as gateway, domain
# node-1 and node-2 (label rack=rack1); everything is removed at the end.
#
# With FASTPATH_AB=1 each round also measures the underlay pod to the external
# host with the daemon's fast path off (--fast-path=false, the DaemonSet rolled).
#
# Uses the lab at ESTUARY_LAB_STATE when one runs there with --cni estuary, else
# brings one up (and down at the end). Needs root, iperf3, ping, jq and bc.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
FASTPATH_AB=${FASTPATH_AB:-}

die() { echo "bench-underlay: $*" >&2; exit 1; }
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh
bench_setup
estuary_lab

cleanup() {
  [ -z "$FASTPATH_AB" ] || fast_path true >/dev/null 2>&1 || true
  kubectl delete pod under-a over-c --ignore-not-found --wait=true >/dev/null 2>&1 || true
  kubectl delete subnet rack1-v4 --ignore-not-found --wait=true >/dev/null 2>&1 || true
  kubectl delete network rack1 --ignore-not-found --wait=true >/dev/null 2>&1 || true
  kubectl label node node-1 node-2 rack- >/dev/null 2>&1 || true
  if [ -n "$OWN_LAB" ]; then "${LAB[@]}" down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

kubectl label node node-1 node-2 rack=rack1 --overwrite >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: networking.estuary.io/v1
kind: Network
metadata: {name: rack1}
spec: {type: Underlay, mode: VLAN, netID: 0, nodeSelector: {rack: rack1}}
---
apiVersion: networking.estuary.io/v1
kind: Subnet
metadata: {name: rack1-v4}
spec:
  network: rack1
  range: {version: 4, cidr: 10.77.100.0/24, gateway: 10.77.100.1, start: 10.77.100.10, end: 10.77.100.200}
YAML
{ netexec_pod under-a node-1 rack1; netexec_pod over-c node-3; } | kubectl apply -f - >/dev/null
kubectl wait --for=condition=Ready pod/under-a pod/over-c --timeout=180s >/dev/null
pid_u=$(sandbox_pid node-1 under-a)
pid_o=$(sandbox_pid node-3 over-c)
[ -n "$pid_u" ] && [ -n "$pid_o" ] || die "no sandbox process for under-a ($pid_u) or over-c ($pid_o)"
ip_u=$(kubectl get pod under-a -o jsonpath='{.status.podIP}')
ext=$("${LAB[@]}" status -o json | jq -r .external.address)
node1=$(node_address node-1)
case "$ip_u" in 10.77.100.*) ;; *) die "under-a has address '$ip_u', not one of rack1-v4" ;; esac

PT=() NT=() PR=() NR=() OT=() RT=() XT=() XR=() XN=()
for ((i = 1; i <= ROUNDS; i++)); do
  if [ -n "$FASTPATH_AB" ]; then
    fast_path false
    XT+=("$(iperf_between external "" node-1 "$pid_u" "$ext")")
    read -r pr nr < <(ping_pair node-1 "$pid_u" "$ext" node-1 "" "$ext")
    XR+=("$pr") XN+=("$nr")
    fast_path true
  fi
  PT+=("$(iperf_between external "" node-1 "$pid_u" "$ext")")
  NT+=("$(iperf_between external "" node-1 "" "$ext")")
  read -r pr nr < <(ping_pair node-1 "$pid_u" "$ext" node-1 "" "$ext")
  PR+=("$pr") NR+=("$nr")
  OT+=("$(iperf_between node-1 "$pid_u" node-3 "$pid_o" "$ip_u")")
  RT+=("$(iperf_between node-1 "" node-3 "" "$node1")")
  echo "bench-underlay: round $i: pod->ext ${PT[-1]} node->ext ${NT[-1]} Gbit/s, rtt ${PR[-1]} / ${NR[-1]} ms, overlay->underlay ${OT[-1]} node-3->node-1 ${RT[-1]} Gbit/s${FASTPATH_AB:+; fast path off: pod->ext ${XT[-1]} Gbit/s, rtt ${XR[-1]} ms}" >&2
done

MPT=$(median "${PT[@]}") MNT=$(median "${NT[@]}") MPR=$(median "${PR[@]}") MNR=$(median "${NR[@]}")
MOT=$(median "${OT[@]}") MRT=$(median "${RT[@]}")
cat <<MD

### underlay (VLAN, untagged) on the lab

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes, load average at the end
$(cut -d' ' -f1-3 /proc/loadavg). Command: \`ROUNDS=$ROUNDS${FASTPATH_AB:+ FASTPATH_AB=1} hack/bench-underlay.sh\`. Medians of $ROUNDS alternating rounds.

| what | pod | node | pod/node (of the medians) | pod/node per round (median) |
| --- | --- | --- | --- | --- |
| iperf3 TCP to the external host, 10 s (Gbit/s): underlay pod on node-1 vs node-1 | $MPT (${PT[*]}) | $MNT (${NT[*]}) | $(ratio "$MPT" "$MNT") | $(round_ratios PT NT) |
| ping RTT to the external host, average of 200 (ms): underlay pod on node-1 vs node-1 | $MPR (${PR[*]}) | $MNR (${NR[*]}) | $(ratio "$MPR" "$MNR") | $(round_ratios PR NR) |
| iperf3 TCP, overlay pod on node-3 to underlay pod on node-1 vs node-3 to node-1 (Gbit/s) | $MOT (${OT[*]}) | $MRT (${RT[*]}) | $(ratio "$MOT" "$MRT") | $(round_ratios OT RT) |
MD
if [ -n "$FASTPATH_AB" ]; then
  MXT=$(median "${XT[@]}") MXR=$(median "${XR[@]}") MXN=$(median "${XN[@]}")
  cat <<MD
| iperf3 TCP to the external host, fast path off (Gbit/s) | $MXT (${XT[*]}) | $MNT | $(ratio "$MXT" "$MNT") | $(round_ratios XT NT) |
| ping RTT to the external host, fast path off (ms) | $MXR (${XR[*]}) | $MXN (${XN[*]}) | $(ratio "$MXR" "$MXN") | $(round_ratios XR XN) |
MD
fi
