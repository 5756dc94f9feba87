# shellcheck shell=bash
# Functions shared by the lab benchmark scripts (hack/bench-*.sh). Sourced
# from the repository's root after the caller defines die; bench_setup sets
# STATE, LAB (the estuary-lab command as an array) and builds the lab tool.

KBIN=

# bench_setup: require root and the tools, choose the lab's state dir
# (ESTUARY_LAB_STATE, else a temporary one) and build bin/estuary-lab.
bench_setup() {
  [ "$(id -u)" -eq 0 ] || die "run as root (the lab makes namespaces, mounts, cgroups)"
  local tool
  for tool in iperf3 ping jq bc nsenter; do
    command -v "$tool" >/dev/null || die "$tool not found (ping: apt-get install iputils-ping)"
  done
  STATE=${ESTUARY_LAB_STATE:-$(mktemp -d /tmp/estuary-bench.XXXXXX)/state}
  LAB=(./bin/estuary-lab --state-dir "$STATE")
  mkdir -p bin
  go build -o bin/estuary-lab ./cmd/estuary-lab
}

# estuary_lab [FAMILY]: use the estuary lab at STATE, or bring a 3-node one up
# (of IP family FAMILY, default ipv4; a running lab must be of that family);
# sets KBIN, and OWN_LAB when it brought the lab up (the caller takes it down).
OWN_LAB=
estuary_lab() {
  local family=${1:-ipv4} have
  have=$("${LAB[@]}" status -o json 2>/dev/null | jq -r '.phase + "/" + .cni + "/" + (.ipFamily // "ipv4")')
  case $have in
    running/estuary/"$family") ;;
    running/estuary/*) die "the lab at $STATE is ${have##*/}; this benchmark needs --ip-family $family" ;;
    *)
      local log
      log=$(mktemp /tmp/estuary-bench-log.XXXXXX)
      echo "bench: up --cni estuary --nodes 3 --ip-family $family" >&2
      "${LAB[@]}" up --cni estuary --nodes 3 --ip-family "$family" >"$log" 2>&1 || { cat "$log" >&2; die "up failed"; }
      OWN_LAB=1
      ;;
  esac
  KBIN=$("${LAB[@]}" status -o json | jq -r .binDir)
  [ -x "$KBIN/kubectl" ] || die "no kubectl in the lab's bin dir '$KBIN'"
}
kubectl() { "$KBIN/kubectl" --kubeconfig "$STATE/kubeconfig" --cache-dir "$STATE/kubectl-cache" "$@"; }

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

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { printf '%.2f\n' "$(echo "scale=4; $1 / $2" | bc -l)"; }
# round_ratios A B: the median of A[i]/B[i] over the rounds (arrays named A
# and B), then the ratios: a pod's and its reference's numbers come from the
# same round, so their ratio drifts less than either does on a shared machine.
round_ratios() {
  local -n num=$1 den=$2
  local r=() i
  for i in "${!num[@]}"; do r+=("$(ratio "${num[i]}" "${den[i]}")"); done
  echo "$(median "${r[@]}") (${r[*]})"
}

# sandbox_pid NODE POD [NAMESPACE]: the pause process of a pod in NAMESPACE
# (default: default; the lab's nodes share the host's pid namespace).
sandbox_pid() {
  local node=$1 pod=$2 ns=${3:-default} cid sid
  cid=$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].containerID}')
  sid=$("${LAB[@]}" exec "$node" -- ctr -n k8s.io containers info --spec "${cid#containerd://}" |
    jq -r '.annotations["io.kubernetes.cri.sandbox-id"]')
  "${LAB[@]}" exec "$node" -- ctr -n k8s.io tasks ls | awk -v id="$sid" '$1 == id && $3 == "RUNNING" {print $2}'
}

# in_ns MACHINE PID CMD...: CMD on a lab machine (node-N, external, router) and,
# with a PID, in that process's network namespace (else the machine's own).
in_ns() {
  local node=$1 pid=$2
  shift 2
  if [ -n "$pid" ]; then
    "${LAB[@]}" exec "$node" -- nsenter --net="/proc/$pid/ns/net" "$@"
  else
    "${LAB[@]}" exec "$node" -- "$@"
  fi
}

# iperf_between SRV_MACHINE SRV_PID CLI_MACHINE CLI_PID DST: TCP throughput of a
# 10 s iperf3 run from the client to DST, in Gbit/s.
iperf_between() {
  local srv_m=$1 srv_pid=$2 cli_m=$3 cli_pid=$4 dst=$5 srv
  in_ns "$srv_m" "$srv_pid" timeout 60 iperf3 -s -1 >/dev/null 2>&1 &
  srv=$!
  listening() { in_ns "$srv_m" "$srv_pid" ss -Hltn 'sport = :5201' | grep -q 5201; }
  wait_until "iperf3 server on $dst" 30 listening
  in_ns "$cli_m" "$cli_pid" iperf3 -c "$dst" -t 10 -J | jq '.end.sum_received.bits_per_second / 1e9 * 100 | round / 100'
  wait "$srv" || true
}

# ping_from MACHINE PID DST: average RTT of 200 pings 0.01 s apart, in ms.
ping_from() {
  in_ns "$1" "$2" ping -c 200 -i 0.01 -q "$3" | awk -F'/' '/^(rtt|round-trip)/ {print $5}'
}

# run_pair N CMD1 CMD2: two commands of N words each (functions too) at the
# same time, so both see the same load on the machine; prints "OUT1 OUT2".
run_pair() {
  local n=$1 a b
  shift
  a=$(mktemp /tmp/estuary-bench-pair.XXXXXX)
  "${@:1:n}" >"$a" &
  b=$("${@:n+1:n}")
  wait $!
  echo "$(cat "$a") $b"
  rm -f "$a"
}

# ping_pair M1 PID1 DST1 M2 PID2 DST2: ping_from both at the same time;
# prints "RTT1 RTT2".
ping_pair() { run_pair 4 ping_from "$1" "$2" "$3" ping_from "$4" "$5" "$6"; }

# netexec_pod NAME NODE [NETWORK]: the manifest of an agnhost netexec pod in
# namespace default bound to NODE, of estuary network NETWORK when given.
netexec_pod() {
  local ann=""
  [ -z "${3:-}" ] || ann=", annotations: {networking.estuary.io/network: $3}"
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default$ann}
spec:
  nodeName: $2
  containers: [{name: netexec, image: estuary-lab.local/agnhost:lab, imagePullPolicy: Never, args: [netexec, --http-port=8080]}]
YAML
}

# node_address NODE: the lab node's address on the switch.
node_address() { "${LAB[@]}" status -o json | jq -r --arg n "$1" '.nodes[] | select(.name == $n) | .address'; }

# pod_pair A B: agnhost netexec pods A on node-1 and B on node-2, Ready; sets
# PID_A and PID_B (their sandboxes' processes) and IP_B.
pod_pair() {
  { netexec_pod "$1" node-1; netexec_pod "$2" node-2; } | kubectl apply -f - >/dev/null
  kubectl wait --for=condition=Ready "pod/$1" "pod/$2" --timeout=180s >/dev/null
  PID_A=$(sandbox_pid node-1 "$1")
  PID_B=$(sandbox_pid node-2 "$2")
  [ -n "$PID_A" ] && [ -n "$PID_B" ] || die "no sandbox process for $1 ($PID_A) or $2 ($PID_B)"
  IP_B=$(kubectl get pod "$2" -o jsonpath='{.status.podIP}')
  IP6_B=$(kubectl get pod "$2" -o jsonpath='{.status.podIPs[*].ip}' | tr ' ' '\n' | grep : || true)
}

# node_address6 NODE: the lab node's IPv6 address on the switch (dual-stack lab).
node_address6() { "${LAB[@]}" status -o json | jq -r --arg n "$1" '.nodes[] | select(.name == $n) | .addresses[] | select(contains(":"))'; }

# fast_path true|false: the daemons' --fast-path, rolled out, and in effect:
# node-1's uplink carries the program (true) or no longer does (false).
fast_path() {
  kubectl -n kube-system get ds estuary-daemon -o json |
    jq --arg v "--fast-path=$1" '(.spec.template.spec.containers[0].args[] | select(startswith("--fast-path"))) |= $v' |
    kubectl apply -f - >/dev/null
  kubectl -n kube-system rollout status ds/estuary-daemon --timeout=180s >/dev/null
  attached() { in_ns node-1 "" tc filter show dev eth0 ingress | grep -q estuary_fastpath; }
  detached() { ! attached; }
  if [ "$1" = true ]; then
    wait_until "fast path attached on node-1" 60 attached
  else
    wait_until "fast path removed from node-1" 60 detached
  fi
}
