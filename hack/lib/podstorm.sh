# shellcheck shell=bash
# The pod storm the lab benchmarks time (hack/bench-lab.sh) and profile
# (hack/bench-cpu.sh): a Deployment of PODS pause pods (image PAUSE) on a lab
# of NODES nodes, created, waited for until all are Running, deleted, and
# waited for until the nodes have removed their sandboxes. Sourced after
# hack/lib/bench.sh (LAB, kubectl, wait_until).

PODS=${PODS:-100}
NODES=3
PAUSE=estuary-lab.local/pause:lab

# containers: how many containers the nodes' containerd holds (k8s.io).
containers() {
  local n c=0
  for ((n = 1; n <= NODES; n++)); do
    c=$((c + $("${LAB[@]}" exec "node-$n" -- ctr -n k8s.io containers ls -q | wc -l)))
  done
  echo "$c"
}
# torn_down: the nodes hold no more containers than before the run: the
# kubelets have removed the deleted pods' sandboxes (and run their CNI DELs),
# which goes on for a minute after the API shows the pods gone.
torn_down() { [ "$(containers)" -le "$BASE_CONTAINERS" ]; }

count_bench() { kubectl get pods -l app=bench --no-headers "$@" 2>/dev/null | wc -l; }
all_running() { [ "$(count_bench --field-selector=status.phase=Running)" -ge "$PODS" ]; }
none_left() { [ "$(count_bench)" -eq 0 ]; }

# deployment [retain]: the bench Deployment; with "retain" its pods keep
# their addresses for it (networking.estuary.io/ip-retain).
deployment() {
  local meta="{labels: {app: bench}}"
  [ "${1:-}" != retain ] || meta='{labels: {app: bench}, annotations: {networking.estuary.io/ip-retain: "true"}}'
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench, namespace: default}
spec:
  replicas: $PODS
  selector: {matchLabels: {app: bench}}
  template:
    metadata: $meta
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: pause, image: $PAUSE, imagePullPolicy: Never}
YAML
}

# create_run [retain]: seconds from creating the Deployment to all its pods
# Running; the pods are deleted again, and their sandboxes removed from the
# nodes, before it returns, so that the next run does not share the machine
# with this one's teardown.
create_run() {
  local start end
  BASE_CONTAINERS=$(containers)
  start=$(date +%s.%N)
  deployment "${1:-}" | kubectl apply -f - >/dev/null
  wait_until "$PODS bench pods Running" 900 all_running
  end=$(date +%s.%N)
  kubectl delete deployment bench --wait=true >/dev/null
  wait_until "bench pods deleted" 600 none_left
  wait_until "bench sandboxes removed from the nodes" 600 torn_down
  printf '%.1f\n' "$(echo "$end - $start" | bc -l)"
}
