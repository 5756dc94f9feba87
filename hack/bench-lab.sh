#!/usr/bin/env bash
# bench-lab.sh measures estuary against the reference bridge CNI on the lab and
# prints markdown tables ready for docs/benchmarks.md:
#   (a) time from creating a Deployment of PODS pause pods to all of them Running,
#       RUNS times on a 3-node `--cni bridge` lab, then RUNS times on a 3-node
#       `--cni estuary` lab: medians and the estuary/bridge ratio;
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

PODS=${PODS:-100}
RUNS=${RUNS:-3}
NODES=3
PAUSE=estuary-lab.local/pause:lab
AGNHOST=estuary-lab.local/agnhost:lab

die() { echo "bench-lab: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (the lab makes namespaces, mounts, cgroups)"
for tool in iperf3 ping jq bc nsenter; do
  command -v "$tool" >/dev/null || die "$tool not found (ping: apt-get install iputils-ping)"
done

STATE=${ESTUARY_LAB_STATE:-$(mktemp -d /tmp/estuary-bench.XXXXXX)/state}
LAB=(./bin/estuary-lab --state-dir "$STATE")
LOG=$(mktemp /tmp/estuary-bench-log.XXXXXX)
mkdir -p bin
go build -o bin/estuary-lab ./cmd/estuary-lab
trap '"${LAB[@]}" down >/dev/null 2>&1 || true' EXIT

KBIN=
kubectl() { "$KBIN/kubectl" --kubeconfig "$STATE/kubeconfig" --cache-dir "$STATE/kubectl-cache" "$@"; }

# up CNI: a fresh 3-node lab with that CNI.
up() {
  echo "bench-lab: up --cni $1 --nodes $NODES" >&2
  "${LAB[@]}" up --cni "$1" --nodes "$NODES" >"$LOG" 2>&1 || { cat "$LOG" >&2; die "up --cni $1 failed"; }
  KBIN=$("${LAB[@]}" status -o json | jq -r .binDir)
  [ -x "$KBIN/kubectl" ] || die "no kubectl in the lab's bin dir '$KBIN'"
}

# wait_until DESC SECONDS CMD...: poll CMD until it succeeds or time runs out.
wait_until() {
  local desc=$1 limit=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || die "$desc: not true after ${limit}s"
    sleep 0.5
  done
}

count_bench() { kubectl get pods -l app=bench --no-headers "$@" 2>/dev/null | wc -l; }
all_running() { [ "$(count_bench --field-selector=status.phase=Running)" -ge "$PODS" ]; }
none_left() { [ "$(count_bench)" -eq 0 ]; }

deployment() {
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench, namespace: default}
spec:
  replicas: $PODS
  selector: {matchLabels: {app: bench}}
  template:
    metadata: {labels: {app: bench}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: pause, image: $PAUSE, imagePullPolicy: Never}
YAML
}

# create_run: seconds from creating the Deployment to all its pods Running;
# the pods are deleted again before it returns.
create_run() {
  local start end
  start=$(date +%s.%N)
  deployment | kubectl apply -f - >/dev/null
  wait_until "$PODS bench pods Running" 900 all_running
  end=$(date +%s.%N)
  kubectl delete deployment bench --wait=true >/dev/null
  wait_until "bench pods deleted" 600 none_left
  printf '%.1f\n' "$(echo "$end - $start" | bc -l)"
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }

# create_series CNI: RUNS timed runs on a fresh lab, into TIMES.
create_series() {
  local i t
  TIMES=()
  up "$1"
  for ((i = 1; i <= RUNS; i++)); do
    t=$(create_run)
    TIMES+=("$t")
    echo "bench-lab: $1 run $i: $t s" >&2
  done
}

# sandbox_pid NODE POD: the pause process of a pod (the lab's nodes share the
# host's pid namespace).
sandbox_pid() {
  local node=$1 pod=$2 cid sid
  cid=$(kubectl get pod "$pod" -o jsonpath='{.status.containerStatuses[0].containerID}')
  sid=$("${LAB[@]}" exec "$node" -- ctr -n k8s.io containers info --spec "${cid#containerd://}" |
    jq -r '.annotations["io.kubernetes.cri.sandbox-id"]')
  "${LAB[@]}" exec "$node" -- ctr -n k8s.io tasks ls | awk -v id="$sid" '$1 == id && $3 == "RUNNING" {print $2}'
}

# in_ns NODE PID CMD...: CMD in the node's mount namespace and, with a PID, in
# that process's network namespace (else the node's own).
in_ns() {
  local node=$1 pid=$2
  shift 2
  if [ -n "$pid" ]; then
    "${LAB[@]}" exec "$node" -- nsenter --net="/proc/$pid/ns/net" "$@"
  else
    "${LAB[@]}" exec "$node" -- "$@"
  fi
}

# iperf_gbps SRV_PID CLI_PID DST: TCP throughput node-1 -> node-2 in Gbit/s.
iperf_gbps() {
  local srv_pid=$1 cli_pid=$2 dst=$3 srv
  in_ns node-2 "$srv_pid" timeout 60 iperf3 -s -1 >/dev/null 2>&1 &
  srv=$!
  listening() { in_ns node-2 "$srv_pid" ss -Hltn 'sport = :5201' | grep -q 5201; }
  wait_until "iperf3 server on $dst" 30 listening
  in_ns node-1 "$cli_pid" iperf3 -c "$dst" -t 10 -J | jq '.end.sum_received.bits_per_second / 1e9 * 100 | round / 100'
  wait "$srv" || true
}

# ping_ms CLI_PID DST: average RTT of 200 pings 0.01 s apart, in ms.
ping_ms() {
  in_ns node-1 "$1" ping -c 200 -i 0.01 -q "$2" | awk -F'/' '/^(rtt|round-trip)/ {print $5}'
}

datapath() {
  local pid_a pid_b ip_b node2
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: bench-a, namespace: default}
spec:
  nodeName: node-1
  containers: [{name: netexec, image: $AGNHOST, imagePullPolicy: Never, args: [netexec, --http-port=8080]}]
---
apiVersion: v1
kind: Pod
metadata: {name: bench-b, namespace: default}
spec:
  nodeName: node-2
  containers: [{name: netexec, image: $AGNHOST, imagePullPolicy: Never, args: [netexec, --http-port=8080]}]
YAML
  kubectl wait --for=condition=Ready pod/bench-a pod/bench-b --timeout=180s >/dev/null
  pid_a=$(sandbox_pid node-1 bench-a)
  pid_b=$(sandbox_pid node-2 bench-b)
  [ -n "$pid_a" ] && [ -n "$pid_b" ] || die "no sandbox process for bench-a ($pid_a) or bench-b ($pid_b)"
  ip_b=$(kubectl get pod bench-b -o jsonpath='{.status.podIP}')
  node2=$("${LAB[@]}" status -o json | jq -r '.nodes[] | select(.name == "node-2") | .address')
  POD_TCP=$(iperf_gbps "$pid_b" "$pid_a" "$ip_b")
  NODE_TCP=$(iperf_gbps "" "" "$node2")
  POD_RTT=$(ping_ms "$pid_a" "$ip_b")
  NODE_RTT=$(ping_ms "" "$node2")
  kubectl delete pod bench-a bench-b --wait=true >/dev/null
}

create_series bridge
BRIDGE=("${TIMES[@]}")
create_series estuary
ESTUARY=("${TIMES[@]}")
datapath

MB=$(median "${BRIDGE[@]}")
ME=$(median "${ESTUARY[@]}")
cat <<MD

### estuary vs bridge on the lab

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes,
$(containerd --version | awk '{print "containerd " $3}'), load average at the end $(cut -d' ' -f1-3 /proc/loadavg).
Command: \`PODS=$PODS RUNS=$RUNS hack/bench-lab.sh\`

| what | bridge | estuary | estuary/bridge |
| --- | --- | --- | --- |
| Deployment of $PODS pause pods, create to all Running, median of $RUNS (s) | $MB (${BRIDGE[*]}) | $ME (${ESTUARY[*]}) | $(ratio "$ME" "$MB") |

| estuary lab, same run | pod on node-1 to pod on node-2 | node-1 to node-2 | pod/node |
| --- | --- | --- | --- |
| iperf3 TCP, 10 s (Gbit/s) | $POD_TCP | $NODE_TCP | $(ratio "$POD_TCP" "$NODE_TCP") |
| ping RTT, 200 pings 0.01 s apart, average (ms) | $POD_RTT | $NODE_RTT | $(ratio "$POD_RTT" "$NODE_RTT") |
MD
