#!/usr/bin/env bash
# demo.sh builds the lab tool, brings a lab up, runs agnhost netexec pods spread
# across the nodes behind a Service, and prints what runs and how to reach it.
# Environment: NODES (3), CNI (bridge), ESTUARY_LAB_STATE (/var/lib/estuary-lab).
set -euo pipefail
cd "$(dirname "$0")/.."

NODES=${NODES:-3}
CNI=${CNI:-bridge}
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (the lab makes namespaces, mounts, cgroups)" >&2; exit 1; }

mkdir -p bin
go build -o bin/estuary-lab ./cmd/estuary-lab
./bin/estuary-lab up --nodes "$NODES" --cni "$CNI"

KUBECONFIG=$(./bin/estuary-lab kubeconfig)
export KUBECONFIG
BIN=$(bash hack/kube-binaries.sh kubectl agnhost | tail -1)   # cached: returns at once
# The lab's own discovery cache, removed with the lab by `estuary-lab down`.
kubectl() { "$BIN/kubectl" --cache-dir "$(dirname "$KUBECONFIG")/kubectl-cache" "$@"; }

IMAGE=estuary-lab.local/agnhost:lab
kubectl apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: netexec}
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
metadata: {name: netexec}
spec:
  selector: {app: netexec}
  ports: [{port: 80, targetPort: 8080}]
YAML
kubectl rollout status deployment/netexec --timeout=180s

echo
kubectl get nodes -o wide
echo
kubectl get pods -o wide
echo
kubectl get service netexec
POD=$(kubectl get pods -l app=netexec -o jsonpath='{.items[0].metadata.name}')
POD_IP=$(kubectl get pods -l app=netexec -o jsonpath='{.items[0].status.podIP}')
SVC_IP=$(kubectl get service netexec -o jsonpath='{.spec.clusterIP}')
echo
echo "Through the Service, from pod $POD:"
for i in 1 2 3; do
  kubectl get --raw "/api/v1/namespaces/default/pods/$POD:8080/proxy/dial?request=hostname&protocol=http&host=$SVC_IP&port=80&tries=1"
  echo
done
echo "From the external host (outside the cluster, behind the router) to pod IP $POD_IP:"
./bin/estuary-lab exec external -- "$BIN/agnhost" connect "$POD_IP:8080" --timeout=5s && echo "  connected"

cat <<TXT

How to reach it:
  export KUBECONFIG=$KUBECONFIG
  $BIN/kubectl get pods -o wide
  $BIN/kubectl exec $POD -- /agnhost connect $SVC_IP:80
  ./bin/estuary-lab exec node-1 -- ctr -n k8s.io containers ls     # a node's containerd
  ./bin/estuary-lab exec external -- ip route                      # the external host
  ./bin/estuary-lab status                                         # topology
  ./bin/estuary-lab down                                           # remove everything
TXT
