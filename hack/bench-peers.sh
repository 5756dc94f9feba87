#!/usr/bin/env bash
# bench-peers.sh measures estuary beside the CNIs a platform team runs today,
# on the same lab size, and prints a markdown table ready for
# docs/benchmarks.md. In RUNS rounds, each CNI on a fresh 3-node lab, in turn
# (bridge, then flannel, then estuary, so load that builds up over the run
# falls on all alike):
#   - a Deployment of PODS pause pods, create to all Running;
#   - CNI ADD latency: the wall time of each ADD of the conflist's main plugin
#     (bridge; flannel, which delegates to bridge and host-local; estuary),
#     logged by a wrapper the script puts in the plugin's place on every node
#     ($EPOCHREALTIME around the plugin, no fork of its own), p50 and p99 of
#     the storm's ADDs;
#   - the node agents' CPU-seconds during the storm and their peak RSS
#     (flanneld; estuary-daemon; bridge has none), summed and maxed over the
#     three nodes;
#   - pod on node-1 to pod on node-2: iperf3 TCP throughput (10 s) and ping
#     RTT (200 pings 0.01 s apart).
# --cni flannel is the real flanneld (VXLAN backend, Kubernetes subnet
# manager); --cni estuary is the chart's default overlay with the fast path on.
#
# Needs root and the machine to itself: each `up` replaces any lab already
# running. Needs iperf3, ping, jq and bc. Environment: PODS (100), RUNS (3),
# CNIS (bridge flannel estuary), ESTUARY_POLICY (true; false runs estuary's
# daemons with --network-policy=false, so the fast path forwards echoes too),
# ESTUARY_LAB_STATE (default: a temporary dir).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
ESTUARY_POLICY=${ESTUARY_POLICY:-true}
CNIS_GIVEN=${CNIS:-}
read -r -a CNIS <<<"${CNIS:-bridge flannel estuary}"

die() { echo "bench-peers: $*" >&2; exit 1; }
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh
# shellcheck source=hack/lib/podstorm.sh
source hack/lib/podstorm.sh
bench_setup
LOG=$(mktemp /tmp/estuary-bench-log.XXXXXX)
trap '"${LAB[@]}" down >/dev/null 2>&1 || true' EXIT
TICK=$(getconf CLK_TCK)
ADDS=/opt/cni/bin/.bench-add-us

# up CNI: a fresh 3-node lab with that CNI.
up() {
  echo "bench-peers: up --cni $1 --nodes $NODES" >&2
  "${LAB[@]}" up --cni "$1" --nodes "$NODES" >"$LOG" 2>&1 || { cat "$LOG" >&2; die "up --cni $1 failed"; }
  KBIN=$("${LAB[@]}" status -o json | jq -r .binDir)
  [ -x "$KBIN/kubectl" ] || die "no kubectl in the lab's bin dir '$KBIN'"
}

# network_policy true|false: the estuary daemons' --network-policy, rolled
# out, and in effect: node-1's policy table exists (true) or is gone (false).
network_policy() {
  kubectl -n kube-system get ds estuary-daemon -o json |
    jq --arg v "--network-policy=$1" '(.spec.template.spec.containers[0].args[] | select(startswith("--network-policy"))) |= $v' |
    kubectl apply -f - >/dev/null
  kubectl -n kube-system rollout status ds/estuary-daemon --timeout=180s >/dev/null
  table() { in_ns node-1 "" nft list table inet estuary-policy >/dev/null 2>&1; }
  no_table() { ! table; }
  if [ "$1" = true ]; then
    wait_until "policy table on node-1" 60 table
  else
    wait_until "policy table removed from node-1" 60 no_table
  fi
}

# main_plugin CNI: the type of the first plugin of the node's conflist.
main_plugin() {
  case $1 in
    bridge) echo bridge ;;
    flannel) echo flannel ;;
    estuary) echo estuary ;;
    *) die "unknown CNI $1" ;;
  esac
}

# wrap_plugin PLUGIN: on every node, PLUGIN's binary moves to PLUGIN.real and
# a wrapper takes its place that appends each ADD's wall time (µs) to $ADDS.
wrap_plugin() {
  local n
  for ((n = 1; n <= NODES; n++)); do
    "${LAB[@]}" exec "node-$n" -- bash -c "set -e
      cd /opt/cni/bin
      [ -x $1 ] || { echo 'no $1 in /opt/cni/bin' >&2; exit 1; }
      [ -e $1.real ] || mv $1 $1.real
      cat >$1.tmp <<'SH'
#!/bin/bash
start=\$EPOCHREALTIME
\"\$0.real\" \"\$@\"
rc=\$?
end=\$EPOCHREALTIME
[ \"\$CNI_COMMAND\" != ADD ] || echo \$(( \${end/./} - \${start/./} )) >>$ADDS
exit \$rc
SH
      chmod 755 $1.tmp && mv $1.tmp $1 && : >$ADDS"
  done
}

# add_times: every node's logged ADD times (µs), one per line.
add_times() {
  local n
  for ((n = 1; n <= NODES; n++)); do "${LAB[@]}" exec "node-$n" -- cat "$ADDS"; done
}

# percentile P: the P-th percentile (nearest rank) of the numbers on stdin.
percentile() { sort -n | awk -v p="$1" '{a[NR]=$1} END {if (!NR) {print "n/a"; exit} i=int((p*NR+99)/100); if (i<1) i=1; print a[i]}'; }

# agent_pids CNI: the node agents' processes (the lab's nodes share the host's
# pid namespace); none for bridge.
agent_pids() {
  case $1 in
    flannel) pgrep -x flanneld || true ;;
    estuary) pgrep -x estuary-daemon || true ;;
  esac
}
cpu_ticks() { local p t=0; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
peak_rss_mib() { local p m=0 v; for p in "$@"; do v=$(awk '/^VmHWM/ {print $2}' "/proc/$p/status"); [ "$v" -le "$m" ] || m=$v; done; echo $((m / 1024)); }

declare -A START ADD50 ADD99 CPU RSS TCP RTT
for ((i = 1; i <= RUNS; i++)); do
  for cni in "${CNIS[@]}"; do
    up "$cni"
    [ "$cni" != estuary ] || [ "$ESTUARY_POLICY" = true ] || network_policy false
    wrap_plugin "$(main_plugin "$cni")"
    mapfile -t pids < <(agent_pids "$cni")
    [ "$cni" = bridge ] || [ "${#pids[@]}" -eq "$NODES" ] || die "$cni: ${#pids[@]} node agents running; want $NODES"
    before=$(cpu_ticks "${pids[@]}")
    START[$cni]+="$(create_run) "
    if [ "${#pids[@]}" -gt 0 ]; then
      CPU[$cni]+="$(printf '%.2f' "$(echo "($(cpu_ticks "${pids[@]}") - $before) / $TICK" | bc -l)") "
      RSS[$cni]+="$(peak_rss_mib "${pids[@]}") "
    fi
    mapfile -t adds < <(add_times)
    [ "${#adds[@]}" -ge "$PODS" ] || die "$cni: $((${#adds[@]})) ADDs logged; want at least $PODS"
    ADD50[$cni]+="$(printf '%s\n' "${adds[@]}" | percentile 50 | awk '{printf "%.1f", $1 / 1000}') "
    ADD99[$cni]+="$(printf '%s\n' "${adds[@]}" | percentile 99 | awk '{printf "%.1f", $1 / 1000}') "
    pod_pair bench-a bench-b
    TCP[$cni]+="$(iperf_between node-2 "$PID_B" node-1 "$PID_A" "$IP_B") "
    RTT[$cni]+="$(ping_from node-1 "$PID_A" "$IP_B") "
    kubectl delete pod bench-a bench-b --wait=true >/dev/null
    echo "bench-peers: round $i, $cni so far: start ${START[$cni]}s; ADD p50 ${ADD50[$cni]}ms; TCP ${TCP[$cni]}Gbit/s; RTT ${RTT[$cni]}ms; agents' CPU ${CPU[$cni]:-(none) }s" >&2
  done
done
"${LAB[@]}" down >/dev/null 2>&1 || true

# med KEY ARRAY: the median of a CNI's values.
med() { local -n a=$2; local v; read -r -a v <<<"${a[$1]:-}"; [ "${#v[@]}" -gt 0 ] || { echo n/a; return; }; median "${v[@]}"; }
all() { local -n a=$2; echo "${a[$1]:-}" | xargs; }
vs() { [ "$1" = n/a ] || [ "$2" = n/a ] || [ "$2" = 0 ] && { echo n/a; return; }; ratio "$1" "$2"; }
row() {
  local what=$1 arr=$2 b f e
  b=$(med bridge "$arr") f=$(med flannel "$arr") e=$(med estuary "$arr")
  echo "| $what | $b ($(all bridge "$arr")) | $f ($(all flannel "$arr")) | $e ($(all estuary "$arr")) | $(vs "$e" "$f") |"
}
cat <<MD

### estuary beside flannel and bridge on the lab

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes,
$(containerd --version | awk '{print "containerd " $3}'), load average at the end $(cut -d' ' -f1-3 /proc/loadavg).
Command: \`PODS=$PODS RUNS=$RUNS${CNIS_GIVEN:+ CNIS='$CNIS_GIVEN'}$([ "$ESTUARY_POLICY" = true ] || echo " ESTUARY_POLICY=false") hack/bench-peers.sh\`. Medians of $RUNS rounds, each value in brackets.

| what | bridge | flannel (VXLAN) | estuary (overlay, fast path$([ "$ESTUARY_POLICY" = true ] || echo ", policy off")) | estuary/flannel |
| --- | --- | --- | --- | --- |
$(row "Deployment of $PODS pause pods, create to all Running (s)" START)
$(row "CNI ADD of the main plugin, p50 (ms)" ADD50)
$(row "CNI ADD of the main plugin, p99 (ms)" ADD99)
$(row "pod on node-1 to pod on node-2, iperf3 TCP 10 s (Gbit/s)" TCP)
$(row "the same, ping RTT, 200 pings 0.01 s apart (ms)" RTT)
$(row "node agents' CPU during the storm, 3 nodes (s; bridge has no agent)" CPU)
$(row "node agent's peak RSS, largest of 3 nodes (MiB)" RSS)
MD
