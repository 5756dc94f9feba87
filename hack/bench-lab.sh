#!/usr/bin/env bash
# bench-lab.sh measures estuary against the reference bridge CNI on the lab and
# prints markdown tables ready for docs/benchmarks.md:
#   (a) time from creating a Deployment of PODS pause pods to all of them Running
#       (on estuary also a retaining Deployment created again, taking its kept addresses),
#       in RUNS rounds, each on a fresh 3-node `--cni bridge` lab and then a fresh
#       3-node `--cni estuary` lab (alternating, so load that builds up over the
#       benchmark falls on both alike): medians and the estuary/bridge ratio;
#   (b) on the estuary lab, in the same run: iperf3 TCP throughput (10 s) and ping
#       RTT (200 pings 0.01 s apart, average) from a pod on node-1 to a pod on
#       node-2, and from node-1 to node-2 itself; pod/node ratios.
# The host's iperf3 and ping run inside each pod's network namespace, entered from
# the node's mount namespace (`estuary-lab exec node-N -- nsenter --net=...`).
#
# Needs root and the machine to itself: each `up` replaces any lab already running.
# Needs iperf3, ping (iputils-ping), jq and bc.
# Environment: PODS (100), RUNS (3), ESTUARY_LAB_STATE (default: a temporary dir).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}

die() { echo "bench-lab: $*" >&2; exit 1; }
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh
# shellcheck source=hack/lib/podstorm.sh
source hack/lib/podstorm.sh
bench_setup
LOG=$(mktemp /tmp/estuary-bench-log.XXXXXX)
trap '"${LAB[@]}" down >/dev/null 2>&1 || true' EXIT

# up CNI: a fresh 3-node lab with that CNI.
up() {
  echo "bench-lab: up --cni $1 --nodes $NODES" >&2
  "${LAB[@]}" up --cni "$1" --nodes "$NODES" >"$LOG" 2>&1 || { cat "$LOG" >&2; die "up --cni $1 failed"; }
  KBIN=$("${LAB[@]}" status -o json | jq -r .binDir)
  [ -x "$KBIN/kubectl" ] || die "no kubectl in the lab's bin dir '$KBIN'"
}

datapath() {
  local pid_a pid_b ip_b node2
  pod_pair bench-a bench-b
  pid_a=$PID_A pid_b=$PID_B ip_b=$IP_B
  node2=$(node_address node-2)
  POD_TCP=$(iperf_between node-2 "$pid_b" node-1 "$pid_a" "$ip_b")
  NODE_TCP=$(iperf_between node-2 "" node-1 "" "$node2")
  POD_RTT=$(ping_from node-1 "$pid_a" "$ip_b")
  NODE_RTT=$(ping_from node-1 "" "$node2")
  kubectl delete pod bench-a bench-b --wait=true >/dev/null
}

BRIDGE=() ESTUARY=() KEPT=()
for ((i = 1; i <= RUNS; i++)); do
  up bridge
  BRIDGE+=("$(create_run)")
  echo "bench-lab: bridge run $i: ${BRIDGE[-1]} s" >&2
  up estuary
  ESTUARY+=("$(create_run)")
  echo "bench-lab: estuary run $i: ${ESTUARY[-1]} s" >&2
  # A retaining Deployment, created (new addresses, kept when its pods go)
  # and created again: the second run's pods take the kept addresses.
  create_run retain >/dev/null
  KEPT+=("$(create_run retain)")
  echo "bench-lab: estuary re-created retaining Deployment, run $i: ${KEPT[-1]} s" >&2
done
datapath

MB=$(median "${BRIDGE[@]}")
ME=$(median "${ESTUARY[@]}")
MK=$(median "${KEPT[@]}")
cat <<MD

### estuary vs bridge on the lab

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes,
$(containerd --version | awk '{print "containerd " $3}'), load average at the end $(cut -d' ' -f1-3 /proc/loadavg).
Command: \`PODS=$PODS RUNS=$RUNS hack/bench-lab.sh\`

| what | bridge | estuary | estuary/bridge |
| --- | --- | --- | --- |
| Deployment of $PODS pause pods, create to all Running, median of $RUNS (s) | $MB (${BRIDGE[*]}) | $ME (${ESTUARY[*]}) | $(ratio "$ME" "$MB") |
| the same with \`ip-retain: "true"\`, deleted and created again: every pod takes a kept address (s) | $MB | $MK (${KEPT[*]}) | $(ratio "$MK" "$MB") |

| estuary lab, same run | pod on node-1 to pod on node-2 | node-1 to node-2 | pod/node |
| --- | --- | --- | --- |
| iperf3 TCP, 10 s (Gbit/s) | $POD_TCP | $NODE_TCP | $(ratio "$POD_TCP" "$NODE_TCP") |
| ping RTT, 200 pings 0.01 s apart, average (ms) | $POD_RTT | $NODE_RTT | $(ratio "$POD_RTT" "$NODE_RTT") |
MD
