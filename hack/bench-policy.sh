#!/usr/bin/env bash
# bench-policy.sh measures estuary's NetworkPolicy enforcement on the lab and
# prints markdown tables ready for docs/benchmarks.md. On one 3-node estuary
# lab (the chart's defaults: networkPolicy.enabled, fast path on), the same
# measures are taken twice, first without the load (the one policy is the
# label servers' own, below), then with 1,000 NetworkPolicies over 10,000
# peers:
#   - iperf3 TCP (10 s) and ping RTT (200 pings 0.01 s apart) from a pod on
#     node-1 to a pod on node-2, ROUNDS times (medians); with the load, the
#     receiving pod is isolated by one of the 1,000 policies (ingress and
#     egress, 200 peers and an ipBlock) and admits the sender through a
#     policy of its own, so the measured path crosses populated chains;
#   - the time from a pod's label change to its enforcement on every node: a
#     server on each node (selected by a policy admitting TCP 8080 from
#     role=client), a client on node-1 whose label goes role=client <->
#     role=none FLIPS times; after each change the client opens connections
#     to each server every 10 ms until 3 in a row show the new state
#     (hack/policybench flip); p50 and p99 over all samples (FLIPS x 3);
#   - the estuary-daemon's resident memory (VmRSS) and Go heap in use on each
#     node, each daemon's mean pass over the flips
#     (estuary_datapath_reconcile_duration_seconds, successful passes) and its
#     CPU time per pass, and the size of each node's table inet estuary-policy.
#
# The load (hack/policybench load): namespaces pb-000 ... pb-099 (team=t<n%10>),
# each with 100 pods bound to a Node "peer-sim" that no kubelet runs, their
# status written by the program (Running, an address of 10.240.0.0/16), and 10
# NetworkPolicies: np<k> selects app=a<k> (the ten select all 10,000 peers),
# admits role=r<k%5> of the ten namespaces of team t<k> on 443 and a named
# port, allows egress to its namespace on the named port, and every third one
# admits an ipBlock with an except on a port range. The peers carry
# networking.estuary.io/webhook=disabled (no webhook call), and the manager is
# scaled to 0 once the measured pods run, for both phases: it plays no part in
# enforcement, and it would otherwise try to give each peer an address (or,
# outside its --pod-label-selector, write an event for each). The real pods
# live in pb-000, so its ten policies select the iperf3 server (app=a0) and
# the label servers (app=a1). Everything is removed at the end, and the
# manager scaled back.
#
# Uses the lab at ESTUARY_LAB_STATE when one runs there with --cni estuary,
# else brings one up (and down at the end). Needs root, iperf3, ping, jq, bc,
# curl and nft. Environment: ROUNDS (3), FLIPS (20), ESTUARY_LAB_STATE.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
FLIPS=${FLIPS:-20}
NS=pb-000

die() { echo "bench-policy: $*" >&2; exit 1; }
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh
for tool in curl nft; do command -v "$tool" >/dev/null || die "$tool not found"; done
bench_setup
go build -o bin/policybench ./hack/policybench
estuary_lab
PB_KUBE=(--kubeconfig "$STATE/kubeconfig")
WORK=$(mktemp -d /tmp/estuary-bench-policy.XXXXXX)

MANAGER_REPLICAS=$(kubectl -n kube-system get deploy estuary-manager -o jsonpath='{.spec.replicas}')
no_manager() { ! pgrep -x estuary-manager >/dev/null; }
# manager_scale N: the manager Deployment at N replicas, and there.
manager_scale() {
  kubectl -n kube-system scale deploy/estuary-manager --replicas="$1" >/dev/null
  if [ "$1" -eq 0 ]; then
    wait_until "the manager to stop" 120 no_manager
  else
    kubectl -n kube-system rollout status deploy/estuary-manager --timeout=180s >/dev/null
  fi
}

cleanup() {
  kubectl -n "$NS" delete pod -l "!policybench.estuary.io/peer" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  ./bin/policybench unload "${PB_KUBE[@]}" >&2 || true
  manager_scale "$MANAGER_REPLICAS" 2>/dev/null || true
  if [ -n "$OWN_LAB" ]; then "${LAB[@]}" down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# pod NAME NODE LABELS: an agnhost netexec pod (HTTP on 8080) in NS.
pod() {
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $NS, labels: {$3}}
spec:
  nodeName: $2
  terminationGracePeriodSeconds: 1
  containers: [{name: netexec, image: estuary-lab.local/agnhost:lab, imagePullPolicy: Never, args: [netexec, --http-port=8080]}]
YAML
}

kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $NS, labels: {policybench.estuary.io/load: "true", team: t0}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: servers-from-clients, namespace: $NS}
spec:
  podSelector: {matchLabels: {role: server}}
  policyTypes: [Ingress]
  ingress: [{from: [{podSelector: {matchLabels: {role: client}}}], ports: [{protocol: TCP, port: 8080}]}]
YAML
{
  pod bench-a node-1 "bench: a"
  pod bench-b node-2 "bench: b, app: a0"
  pod cli node-1 "role: none"
  for n in 1 2 3; do pod "srv-$n" "node-$n" "role: server, app: a1"; done
} | kubectl apply -f - >/dev/null
kubectl -n "$NS" wait --for=condition=Ready pod/bench-a pod/bench-b pod/cli pod/srv-1 pod/srv-2 pod/srv-3 --timeout=180s >/dev/null
PID_A=$(sandbox_pid node-1 bench-a "$NS")
PID_B=$(sandbox_pid node-2 bench-b "$NS")
PID_C=$(sandbox_pid node-1 cli "$NS")
[ -n "$PID_A" ] && [ -n "$PID_B" ] && [ -n "$PID_C" ] || die "no sandbox process for bench-a ($PID_A), bench-b ($PID_B) or cli ($PID_C)"
IP_B=$(kubectl -n "$NS" get pod bench-b -o jsonpath='{.status.podIP}')
TARGETS=()
for n in 1 2 3; do
  TARGETS+=(--target "node-$n=$(kubectl -n "$NS" get pod "srv-$n" -o jsonpath='{.status.podIP}'):8080")
done
manager_scale 0

# daemon_pid NODE: the estuary-daemon process in NODE's network namespace.
daemon_pid() {
  local want pid
  want=$(in_ns "$1" "" stat -L -c %i /proc/self/ns/net)
  for pid in $(pgrep -x estuary-daemon); do
    if [ "$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null)" = "$want" ]; then
      echo "$pid"
      return
    fi
  done
  die "no estuary-daemon process in $1's network namespace"
}
rss_mib() { awk '/^VmRSS:/ {printf "%.0f\n", $2 / 1024}' "/proc/$1/status"; }
# cpu_ticks PID: the process's user and system CPU time, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# heap_mib NODE: the daemon's Go heap in use (go_memstats_heap_inuse_bytes).
heap_mib() {
  in_ns "$1" "" curl -sf http://127.0.0.1:9782/metrics | awk '$1 == "go_memstats_heap_inuse_bytes" {printf "%.0f\n", $2 / 1048576}'
}
# passes NODE: "SUM COUNT" of the daemon's successful passes, and its CPU
# ticks.
passes() {
  in_ns "$1" "" curl -sf http://127.0.0.1:9782/metrics | awk -v cpu="$(cpu_ticks "$(daemon_pid "$1")")" '
    $1 == "estuary_datapath_reconcile_duration_seconds_sum{result=\"success\"}" {s = $2}
    $1 == "estuary_datapath_reconcile_duration_seconds_count{result=\"success\"}" {c = $2}
    END {print s + 0, c + 0, cpu}'
}
policy_failures() {
  in_ns "$1" "" curl -sf http://127.0.0.1:9782/metrics |
    awk '$1 == "estuary_datapath_reconcile_failures_total{part=\"policy\"}" {print $2 + 0}'
}
# table NODE: the size of NODE's policy table.
table() {
  in_ns "$1" "" nft -j list table inet estuary-policy | jq -r '
    [.nftables[] | keys[0]] as $k | ([.nftables[] | .set.elem? // empty | length] | add // 0) as $e |
    "\($k | map(select(. == "chain")) | length) chains, \($k | map(select(. == "set")) | length) sets, \($k | map(select(. == "rule")) | length) rules, \($e) elements"'
}
# pct P: the P-th percentile (nearest rank) of the numbers on stdin.
pct() { sort -n | awk -v p="$1" '{a[NR] = $1} END {i = int((p * NR + 99) / 100); print a[i < 1 ? 1 : i]}'; }

declare -A TCP RTT P50 P99 ADMIT DROP PERNODE RSS HEAP PASS TABLE
measure() {
  local phase=$1 tcp=() rtt=() i n s1 c1 u1 s2 c2 u2 flips="$WORK/flips-$1.tsv"
  local -a before=() after=()
  echo "bench-policy: $phase: iperf3 and ping, $ROUNDS rounds" >&2
  for ((i = 1; i <= ROUNDS; i++)); do
    tcp+=("$(iperf_between node-2 "$PID_B" node-1 "$PID_A" "$IP_B")")
    rtt+=("$(ping_from node-1 "$PID_A" "$IP_B")")
  done
  TCP[$phase]="$(median "${tcp[@]}") (${tcp[*]})"
  RTT[$phase]="$(median "${rtt[@]}") (${rtt[*]})"
  echo "bench-policy: $phase: $FLIPS label changes" >&2
  for n in 1 2 3; do before[n]=$(passes "node-$n"); done
  ./bin/policybench flip "${PB_KUBE[@]}" --namespace "$NS" --pod cli --netns "/proc/$PID_C/ns/net" \
    "${TARGETS[@]}" --flips "$FLIPS" >"$flips"
  for n in 1 2 3; do after[n]=$(passes "node-$n"); done
  P50[$phase]=$(tail -n +2 "$flips" | cut -f4 | pct 50)
  P99[$phase]=$(tail -n +2 "$flips" | cut -f4 | pct 99)
  ADMIT[$phase]=$(awk -F'\t' '$2 == "admit"' "$flips" | cut -f4 | pct 50)
  DROP[$phase]=$(awk -F'\t' '$2 == "drop"' "$flips" | cut -f4 | pct 50)
  PERNODE[$phase]=$(for n in 1 2 3; do awk -F'\t' -v t="node-$n" '$3 == t' "$flips" | cut -f4 | pct 50; done | paste -sd/)
  RSS[$phase]=$(for n in 1 2 3; do rss_mib "$(daemon_pid "node-$n")"; done | paste -sd/)
  HEAP[$phase]=$(for n in 1 2 3; do heap_mib "node-$n"; done | paste -sd/)
  PASS[$phase]=$(for n in 1 2 3; do
    read -r s1 c1 u1 <<<"${before[n]}"
    read -r s2 c2 u2 <<<"${after[n]}"
    echo "$s1 $c1 $u1 $s2 $c2 $u2 $(getconf CLK_TCK)" | awk '{
      if ($5 > $2) printf "%.0f ms, CPU %.0f ms (%d)\n", ($4 - $1) / ($5 - $2) * 1000, ($6 - $3) / $7 / ($5 - $2) * 1000, $5 - $2
      else print "-"}'
  done | paste -sd/ | sed 's|/| / |g')
  TABLE[$phase]=$(for n in 1 2 3; do echo "node-$n: $(table "node-$n")"; done | paste -sd';' | sed 's/;/; /g')
}

measure without

echo "bench-policy: loading 1,000 policies over 10,000 peers" >&2
LOAD_START=$SECONDS
./bin/policybench load "${PB_KUBE[@]}" >"$WORK/load.txt"
LOAD_API=$((SECONDS - LOAD_START))
kubectl apply -f - >/dev/null <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bench-b-from-a, namespace: $NS}
spec:
  podSelector: {matchLabels: {bench: b}}
  policyTypes: [Ingress]
  ingress: [{from: [{podSelector: {matchLabels: {bench: a}}}]}]
YAML
# The nodes hold the load once every table has peers of the load and has
# not changed for 5 s; LOAD_ENFORCED is when the tables last changed.
LAST= CHANGED=$SECONDS
loaded() {
  local now n
  for n in 1 2 3; do in_ns "node-$n" "" nft list table inet estuary-policy | grep '10\.240\.' >/dev/null || return 1; done
  now=$(for n in 1 2 3; do table "node-$n"; done)
  if [ "$now" != "$LAST" ]; then
    LAST=$now CHANGED=$SECONDS
    return 1
  fi
  [ $((SECONDS - CHANGED)) -ge 5 ]
}
wait_until "the nodes' policy tables to hold the load" 600 loaded
LOAD_ENFORCED=$((CHANGED - LOAD_START))
# The daemons have caught up with the load once none has passed for 5 s
# (a pass follows every change of a pod, so one still reading the load's
# events keeps passing); LOAD_QUIET is when the last one passed.
LASTP= QUIET=$SECONDS
quiet() {
  local now
  now=$(for n in 1 2 3; do passes "node-$n" | cut -d' ' -f2; done | paste -sd/)
  if [ "$now" != "$LASTP" ]; then
    LASTP=$now QUIET=$SECONDS
    return 1
  fi
  [ $((SECONDS - QUIET)) -ge 5 ]
}
wait_until "the daemons to stop passing" 600 quiet
LOAD_QUIET=$((QUIET - LOAD_START))

measure with

FAILS=$(for n in 1 2 3; do policy_failures "node-$n"; done | paste -sd/)
ratio_of() { ratio "${1%% *}" "${2%% *}"; }
cat <<MD

### NetworkPolicy on the lab

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes,
$(containerd --version | awk '{print "containerd " $3}'), load average at the end $(cut -d' ' -f1-3 /proc/loadavg);
$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '+changes').
Command: \`ROUNDS=$ROUNDS FLIPS=$FLIPS hack/bench-policy.sh\` (total $((SECONDS / 60)) min $((SECONDS % 60)) s).

Load: 1,000 NetworkPolicies (10 in each of 100 namespaces) over 10,000 peer
pods (100 per namespace), plus the two policies of the measured pods; the
API took ${LOAD_API} s to take it ($(awk -F'\t' '$1 != "total" {printf "%s%s %s in %s", (NR > 1 ? ", " : ""), $2, $1, $3}' "$WORK/load.txt")),
every node's table held it ${LOAD_ENFORCED} s after the load started, and the
daemons made their last pass for it at ${LOAD_QUIET} s.

| what | without the load (one policy: the label servers') | with the load | with/without |
| --- | --- | --- | --- |
| iperf3 TCP 10 s, pod on node-1 to pod on node-2, median of $ROUNDS (Gbit/s) | ${TCP[without]} | ${TCP[with]} | $(ratio_of "${TCP[with]}" "${TCP[without]}") |
| ping RTT, 200 pings 0.01 s apart, average, median of $ROUNDS (ms) | ${RTT[without]} | ${RTT[with]} | $(ratio_of "${RTT[with]}" "${RTT[without]}") |
| label change to enforced on a node, p50 of $((FLIPS * 3)) (ms) | ${P50[without]} | ${P50[with]} | $(ratio "${P50[with]}" "${P50[without]}") |
| the same, p99 (nearest rank: the largest of $((FLIPS * 3))) (ms) | ${P99[without]} | ${P99[with]} | $(ratio "${P99[with]}" "${P99[without]}") |
| p50 of the changes that admit / that drop (ms) | ${ADMIT[without]} / ${DROP[without]} | ${ADMIT[with]} / ${DROP[with]} | |
| p50 per server node, node-1 (the client's) / node-2 / node-3 (ms) | ${PERNODE[without]} | ${PERNODE[with]} | |
| estuary-daemon RSS, node-1 / node-2 / node-3 (MiB) | ${RSS[without]} | ${RSS[with]} | |
| estuary-daemon Go heap in use, node-1 / node-2 / node-3 (MiB) | ${HEAP[without]} | ${HEAP[with]} | |
| daemon pass over the label changes: mean duration, the daemon's CPU time per pass (passes), node-1 / node-2 / node-3 | ${PASS[without]} | ${PASS[with]} | |
| policy table | ${TABLE[without]} | ${TABLE[with]} | |

Policy part failures over the run (estuary_datapath_reconcile_failures_total{part="policy"}, node-1/2/3): $FAILS.
MD
echo "bench-policy: the label-change samples are in $WORK/flips-without.tsv and $WORK/flips-with.tsv" >&2
