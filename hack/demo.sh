#!/usr/bin/env bash
# demo.sh shows estuary at work on the lab. It brings up a lab with estuary
# installed from the checkout (or uses a running one), runs agnhost netexec
# pods spread across the nodes behind a Service, and shows what estuary adds:
# one overlay range for the whole cluster instead of a block per node, a
# retaining Deployment whose re-created pod gets its address back, an underlay
# pod the external host reaches without NAT, and `kubectl estuary get ip`
# naming an address's holder.
#
# Every probe waits for its condition up to a deadline, then prints one line
# starting with "ok" or "FAIL". The first FAIL ends the demo with exit status
# 1; the line names what was waited for and the last answer seen.
#
# Environment:
#   CNI                estuary (default), or bridge: the reference plugins, for
#                      comparison (the estuary parts are skipped)
#   NODES              number of nodes (3)
#   ESTUARY_LAB_STATE  the lab's state directory (/var/lib/estuary-lab)
#   DEMO_REUSE_LAB=1   use the lab running at ESTUARY_LAB_STATE (its CNI decides
#                      what is shown) instead of `estuary-lab up`, which
#                      replaces any lab there
#   DEMO_NAMESPACE     namespace of the demo's workloads (estuary-demo)
#   ESTUARY_LAB, KUBECTL_ESTUARY
#                      prebuilt estuary-lab and kubectl-estuary (default: built
#                      into bin/)
set -Eeuo pipefail
cd "$(dirname "$0")/.."

NODES=${NODES:-3}
CNI=${CNI:-estuary}
NS=${DEMO_NAMESPACE:-estuary-demo}
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (the lab makes namespaces, mounts, cgroups)" >&2; exit 1; }

# The lab's underlay segment on the switch, routed by the router (its
# gateway) to the external host: test/infra/lab/plan.go, UnderlayCIDR.
UNDERLAY_CIDR=10.77.100.0/24
UNDERLAY_GW=10.77.100.1
UNDERLAY_NET=demo-underlay
IMAGE=estuary-lab.local/agnhost:lab

ok() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  exit 1
}
trap 'echo "FAIL  hack/demo.sh line $LINENO: $BASH_COMMAND (exit status $?)"' ERR

# wait_for DESC SECONDS CHECK [ARG...]: runs CHECK until it succeeds, again
# every second, for at most SECONDS. CHECK says in $why what it saw while it
# fails; that is printed only when the deadline passes.
why=
wait_for() {
  local desc=$1 limit=$2 deadline=$((SECONDS + $2))
  shift 2
  why=
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$desc: not done after ${limit}s: ${why:-no answer}"
    sleep 1
  done
}

# ip4 ADDR: IPv4 address ADDR as a number.
ip4() {
  local IFS=. a b c d
  read -r a b c d <<<"$1"
  echo $(((a << 24) | (b << 16) | (c << 8) | d))
}
# in_cidr ADDR CIDR: whether IPv4 address ADDR lies in CIDR.
in_cidr() {
  [[ $1 =~ ^[0-9]+(\.[0-9]+){3}$ && $2 =~ ^[0-9]+(\.[0-9]+){3}/[0-9]+$ ]] || return 1
  local bits=${2#*/} mask
  mask=$(((0xffffffff << (32 - bits)) & 0xffffffff))
  [ $(($(ip4 "$1") & mask)) -eq $(($(ip4 "${2%/*}") & mask)) ]
}

mkdir -p bin
LAB=${ESTUARY_LAB:-}
if [ -z "$LAB" ]; then
  go build -o bin/estuary-lab ./cmd/estuary-lab
  LAB=./bin/estuary-lab
fi
PLUGIN=${KUBECTL_ESTUARY:-}
if [ -z "$PLUGIN" ]; then
  go build -o bin/kubectl-estuary ./cmd/kubectl-estuary
  PLUGIN=$PWD/bin/kubectl-estuary
fi

STATE_DIR=${ESTUARY_LAB_STATE:-/var/lib/estuary-lab}
# lab_field LABEL: a field of `estuary-lab status` ("lab", "cni", "external").
lab_status=
lab_field() { sed -n "s/^\(.*  \)\{0,1\}$1: *\([^ ]*\).*/\2/p" <<<"$lab_status" | head -1; }
if [ "${DEMO_REUSE_LAB:-}" = 1 ]; then
  lab_status=$("$LAB" status 2>&1) || fail "DEMO_REUSE_LAB=1: estuary-lab status: $lab_status"
  [ "$(lab_field lab)" = running ] || fail "DEMO_REUSE_LAB=1: no lab runs at $STATE_DIR (estuary-lab status: $(lab_field lab))"
  CNI=$(lab_field cni)
  echo "Using the lab running at $STATE_DIR (CNI $CNI)."
else
  case "$CNI" in estuary | bridge) ;; *) fail "CNI=$CNI: want estuary or bridge" ;; esac
  echo "Bringing up a $NODES-node lab with CNI $CNI (this replaces any lab at $STATE_DIR; DEMO_REUSE_LAB=1 uses a running one)."
  "$LAB" up --nodes "$NODES" --cni "$CNI" || fail "estuary-lab up --nodes $NODES --cni $CNI"
  lab_status=$("$LAB" status 2>&1) || fail "estuary-lab status: $lab_status"
fi
EXTERNAL=$(lab_field external)

KUBECONFIG=$("$LAB" kubeconfig)
export KUBECONFIG
KBIN=${ESTUARY_LAB_BIN_DIR:-$(bash hack/kube-binaries.sh kubectl | tail -1)} # cached: returns at once
# The lab's own discovery cache, removed with the lab by `estuary-lab down`.
kubectl() { "$KBIN/kubectl" --cache-dir "$(dirname "$KUBECONFIG")/kubectl-cache" "$@"; }
NODES=$(kubectl get nodes -o name | wc -l)

# apply applies the YAML on stdin; the webhooks may still be starting, so a
# refusal is tried again.
apply_yaml() { why=$(kubectl apply -f - 2>&1 <<<"$yaml") && return 0; why=${why//$'\n'/ }; return 1; }
apply() {
  yaml=$(cat)
  wait_for "kubectl apply ($1)" 60 apply_yaml
}

# ready APP N: the pods of label app=APP that have not finished are exactly
# N, all Ready and none terminating; sets $pods to "name node ip" of each,
# sorted by node.
ready() {
  local all n_active n_ready
  all=$(kubectl get pods -n "$NS" -l "app=$1" -o jsonpath='{range .items[*]}{.metadata.name}|{.spec.nodeName}|{.status.podIP}|{.status.phase}|{.metadata.deletionTimestamp}|{range .status.conditions[?(@.type=="Ready")]}{.status}{end}{"\n"}{end}' 2>&1) || {
    why=$all
    return 1
  }
  pods=$(awk -F'|' '$4 == "Running" && $5 == "" && $6 == "True" {print $1, $2, $3}' <<<"$all" | sort -k2)
  n_active=$(awk -F'|' '$1 != "" && $4 != "Succeeded" && $4 != "Failed"' <<<"$all" | grep -c . || true)
  n_ready=$(grep -c . <<<"$pods" || true)
  why="$n_ready of $2 pods Ready, $n_active not finished: $(awk -F'|' '$1 != "" {printf "%s %s %s%s; ", $1, $4, ($5 == "" ? "" : "terminating "), ($6 == "True" ? "Ready" : "not Ready")}' <<<"$all")"
  [ "$n_ready" -eq "$2" ] && [ "$n_active" -eq "$2" ]
}
# gone APP: no pod of APP exists.
gone() {
  local all
  all=$(kubectl get pods -n "$NS" -l "app=$1" -o name 2>&1) || { why=$all; return 1; }
  why="still there: ${all//$'\n'/ }"
  [ -z "$all" ]
}

echo
echo "Workloads in namespace $NS:"
apply "namespace $NS, Deployment netexec, Service netexec" <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: netexec, namespace: $NS}
spec:
  replicas: $NODES
  selector: {matchLabels: {app: netexec}}
  template:
    metadata: {labels: {app: netexec}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: netexec}}}
      containers:
      - {name: netexec, image: $IMAGE, imagePullPolicy: Never, args: [netexec, --http-port=8080]}
---
apiVersion: v1
kind: Service
metadata: {name: netexec, namespace: $NS}
spec:
  selector: {app: netexec}
  ports: [{port: 80, targetPort: 8080}]
YAML
echo "  Deployment netexec ($NODES pods, one per node) behind Service netexec"
if [ "$CNI" = estuary ]; then
  apply "Deployment keep, Network $UNDERLAY_NET" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: keep, namespace: $NS}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: keep}}
  template:
    metadata:
      labels: {app: keep}
      annotations: {networking.estuary.io/ip-retain: "true", networking.estuary.io/ip-retain-ttl: "1h"}
    spec:
      containers:
      - {name: netexec, image: $IMAGE, imagePullPolicy: Never, args: [netexec, --http-port=8080]}
---
apiVersion: networking.estuary.io/v1
kind: Network
metadata: {name: $UNDERLAY_NET}
spec: {type: Underlay, mode: VLAN, netID: 0, nodeSelector: {kubernetes.io/os: linux}}
---
apiVersion: networking.estuary.io/v1
kind: Subnet
metadata: {name: $UNDERLAY_NET-v4}
spec:
  network: $UNDERLAY_NET
  range: {version: 4, cidr: $UNDERLAY_CIDR, gateway: $UNDERLAY_GW, start: 10.77.100.50, end: 10.77.100.59}
YAML
  echo "  Deployment keep (1 pod, annotation networking.estuary.io/ip-retain: \"true\")"
  subnet_installed() {
    why=$(kubectl get subnet "$UNDERLAY_NET-v4" -o jsonpath='{.status.total}' 2>&1) || return 1
    [ -n "$why" ] || { why="no status.total yet"; return 1; }
  }
  wait_for "Subnet $UNDERLAY_NET-v4 taken up by the manager" 60 subnet_installed
  apply "Deployment underlay" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: underlay, namespace: $NS}
spec:
  replicas: 1
  selector: {matchLabels: {app: underlay}}
  template:
    metadata:
      labels: {app: underlay}
      annotations: {networking.estuary.io/network: $UNDERLAY_NET}
    spec:
      containers:
      - {name: netexec, image: $IMAGE, imagePullPolicy: Never, args: [netexec, --http-port=8080]}
YAML
  echo "  Network $UNDERLAY_NET (Underlay, untagged VLAN on every node) with Subnet $UNDERLAY_NET-v4 ($UNDERLAY_CIDR), Deployment underlay (1 pod on it)"
fi
echo

wait_for "Deployment netexec: $NODES pods Ready" 180 ready netexec "$NODES"
netexec=$pods
ok "Deployment netexec: $NODES pods Ready on $(awk '{print $2}' <<<"$netexec" | sort -u | paste -sd, | sed 's/,/, /g')"

# Service: endpoints first, then answers through the ClusterIP from a pod.
SVC_IP=$(kubectl get service netexec -n "$NS" -o jsonpath='{.spec.clusterIP}')
endpoints_ready() {
  local r
  r=$(kubectl get endpointslices -n "$NS" -l kubernetes.io/service-name=netexec \
    -o jsonpath='{range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}' 2>&1) || { why=$r; return 1; }
  r=$(grep -c '^true$' <<<"$r" || true)
  why="$r of $NODES endpoints ready"
  [ "$r" -eq "$NODES" ]
}
wait_for "Service netexec: $NODES endpoints ready" 60 endpoints_ready
ok "Service netexec: $NODES endpoints ready"
CLIENT=$(awk 'NR == 1 {print $1}' <<<"$netexec")
declare -A answered=()
service_answers() {
  local r h
  r=$(kubectl get --raw "/api/v1/namespaces/$NS/pods/$CLIENT:8080/proxy/dial?request=hostname&protocol=http&host=$SVC_IP&port=80&tries=1" 2>&1) || {
    why=$r
    return 1
  }
  h=$(sed -n 's/.*"responses":\["\([^"]*\)".*/\1/p' <<<"$r")
  if [ -n "$h" ]; then answered[$h]=1; else why=$r; fi
  [ "${#answered[@]}" -eq "$NODES" ]
}
wait_for "Service netexec $SVC_IP:80 answering from pod $CLIENT by each of its $NODES pods" 60 service_answers
ok "Service netexec $SVC_IP:80 answers pod $CLIENT from all $NODES pods: $(printf '%s\n' "${!answered[@]}" | sort | paste -sd' ')"

echo
echo "Pod addresses by node:"
printf '  %-8s %-15s %-28s %s\n' NODE IP POD "NODE'S podCIDR"
while read -r pod node ip; do
  printf '  %-8s %-15s %-28s %s\n' "$node" "$ip" "$pod" "$(kubectl get node "$node" -o jsonpath='{.spec.podCIDR}')"
done <<<"$netexec"

if [ "$CNI" != estuary ]; then
  echo
  echo "skip  overlay range, fixed IPs, underlay and kubectl estuary: this lab runs CNI $CNI, the reference bridge plugin (a /24 block per node, no IP records); make demo runs estuary"
else
  # (a) One overlay range for the cluster: every pod's record names the same
  # subnet, and its address lies in that subnet's CIDR.
  subnet=
  while read -r pod node ip; do
    s=$(kubectl get ipinstance "$ip" -o jsonpath='{.spec.subnet}' 2>&1) || fail "IPInstance $ip of pod $pod: $s"
    [ -z "$subnet" ] || [ "$s" = "$subnet" ] || fail "pods of netexec are on subnets $subnet and $s, want one overlay subnet"
    subnet=$s
  done <<<"$netexec"
  read -r network cidr <<<"$(kubectl get subnet "$subnet" -o jsonpath='{.spec.network} {.spec.range.cidr}')"
  ntype=$(kubectl get network "$network" -o jsonpath='{.spec.type}')
  [ "$ntype" = Overlay ] || fail "pods of netexec are on network $network of type $ntype, want Overlay"
  while read -r pod node ip; do
    in_cidr "$ip" "$cidr" || fail "pod $pod on $node has $ip, outside Subnet $subnet ($cidr)"
  done <<<"$netexec"
  ok "the pods on $(awk '{print $2}' <<<"$netexec" | sort -u | grep -c .) nodes all have addresses of one overlay Subnet, $subnet ($cidr, network $network); estuary leaves the nodes' podCIDR blocks unused"

  # (b) Fixed IPs: the retaining Deployment's pod goes (scaled to 0) and
  # its workload makes it again (scaled to 1); the new pod gets the address back.
  echo
  echo "Fixed IPs: Deployment keep, annotation networking.estuary.io/ip-retain: \"true\""
  wait_for "Deployment keep: 1 pod Ready" 180 ready keep 1
  read -r kpod knode kip <<<"$pods"
  echo "  pod $kpod on $knode has $kip"
  kubectl scale deployment keep -n "$NS" --replicas=0 >/dev/null
  wait_for "Deployment keep scaled to 0: pod $kpod gone" 120 gone keep
  retained() {
    why=$(kubectl get ipinstance "$kip" -o jsonpath='{.status.phase} for {.spec.binding.owner.kind} {.spec.binding.namespace}/{.spec.binding.owner.name}' 2>&1) || return 1
    [[ $why == Retained* ]]
  }
  wait_for "address $kip kept for Deployment keep" 60 retained
  echo "  scaled to 0: pod gone, $kip $why"
  kubectl scale deployment keep -n "$NS" --replicas=1 >/dev/null
  wait_for "Deployment keep scaled to 1: 1 pod Ready" 180 ready keep 1
  read -r kpod2 knode2 kip2 <<<"$pods"
  echo "  scaled to 1: new pod $kpod2 on $knode2 has $kip2"
  [ "$kip2" = "$kip" ] || fail "Deployment keep's new pod $kpod2 has $kip2, want the address its workload kept, $kip"
  ok "the re-created pod of Deployment keep got its address $kip back"

  # (c) Underlay: the external host, outside the cluster behind the router,
  # reaches the pod at its own address and the pod sees the host's address.
  echo
  echo "Underlay: Network $UNDERLAY_NET, pods on the lab's switch segment $UNDERLAY_CIDR"
  wait_for "Deployment underlay: 1 pod Ready" 180 ready underlay 1
  read -r upod unode uip <<<"$pods"
  in_cidr "$uip" "$UNDERLAY_CIDR" || fail "underlay pod $upod has $uip, outside $UNDERLAY_CIDR"
  echo "  pod $upod on $unode has $uip"
  seen=
  external_reaches() {
    why=$("$LAB" exec external -- curl -sS --max-time 3 "http://$uip:8080/clientip" 2>&1) || return 1
    seen=${why%:*}
  }
  wait_for "external host $EXTERNAL -> http://$uip:8080/clientip" 60 external_reaches
  [ "$seen" = "$EXTERNAL" ] || fail "pod $upod saw the external host $EXTERNAL as $seen: the path is NATed"
  ok "the external host $EXTERNAL reached pod $upod at its own address $uip, and the pod saw the host's own address $seen: no NAT on the way"

  # (d) kubectl estuary names who holds an address.
  echo
  echo "\$ kubectl estuary get ip $kip2"
  plugin_out=$(PATH="$(dirname "$PLUGIN"):$PATH" "$KBIN/kubectl" estuary get ip "$kip2" 2>&1) || fail "kubectl estuary get ip $kip2: $plugin_out"
  sed 's/^/  /' <<<"$plugin_out"
  grep -q "^Pod: *$NS/$kpod2 " <<<"$plugin_out" && grep -q "^Phase: *Bound" <<<"$plugin_out" ||
    fail "kubectl estuary get ip $kip2 does not name pod $NS/$kpod2 as its Bound holder"
  ok "kubectl estuary names pod $NS/$kpod2 as the holder of $kip2"
fi

cat <<TXT

Next steps:
  docs/architecture.md  underlay networks (VLAN, BGP) beside the overlay: "Network domains"; config/samples/
  docs/fixed-ips.md     fixed IPs: retention, ip-address, ip-pool, reservations
  docs/ipam-tools.md    kubectl estuary: get, subnets, reserve, release, check, repair
  docs/lab.md           the lab: topology and commands

The lab stays up (with the PATH below, kubectl and kubectl estuary are the lab's):
  kubectl get pods -n $NS -o wide
  kubectl exec -n $NS deploy/netexec -- curl -s http://netexec/hostname
  $LAB exec external -- ip route    # a command on the external host
  $LAB status                       # topology
TXT
if [ "$CNI" = estuary ]; then
  echo "  kubectl delete namespace $NS; kubectl delete subnet/$UNDERLAY_NET-v4 network/$UNDERLAY_NET   # the demo's objects"
fi
cat <<TXT
  $LAB down                         # remove everything
  export ${ESTUARY_LAB_STATE:+ESTUARY_LAB_STATE=$STATE_DIR }KUBECONFIG=$KUBECONFIG PATH=$KBIN:$(dirname "$PLUGIN"):\$PATH
TXT
