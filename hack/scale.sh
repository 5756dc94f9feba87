#!/usr/bin/env bash
# scale.sh measures estuary at scale: a lab with estuary installed from the
# chart and ONE real node (its daemon), plus NODES fake nodes run by kwok
# (hack/kwok.sh, built from the Go module proxy and cached) that carry the
# VTEP annotations a daemon publishes, and PODS pods in Deployments of
# PODS_PER_DEPLOYMENT over the lab's overlay and two underlay networks; then a
# tenth of the Deployments is deleted and re-created. bin/estuary-scale
# (test/infra/lab/scale) drives it and prints the report: allocation latency and
# rate, webhook latency, API requests per pod, the real daemon's memory,
# data-path pass and kernel entries, VTEP to FDB time, the manager's cold
# start and peak memory. The lab is removed at the end (KEEP=1 leaves it).
#
# Environment: NODES (1000), PODS (50000), PODS_PER_DEPLOYMENT (100),
# CONTROL_PLANE_QPS (500: kube-controller-manager's and kube-scheduler's API
# rate, so that they are not what limits the storm), STATE
# (/var/lib/estuary-scale), MANAGER_QPS (0: the chart's API client rate of
# the manager, 100 and burst 200; N sets N and burst 2N), MANAGER_WORKERS (0: the
# chart's 16 pods allocated in parallel), MANAGER_MEMORY (empty: the chart's
# limit, 1Gi; e.g. 2Gi to measure a footprint above it), MANAGER_WATCH_LIST
# (false: true streams the manager's informers' initial state, client-go's
# WatchListClient, instead of the one list it reads), RECORDS (100000:
# the IPInstances the manager's cold start rebuilds; reservations top up
# what the storms leave), API_PORT (16447), TIMEOUT (2h), OUT
# (_output/scale: the report, kwok's log, and the profiles with their top
# functions: kube-apiserver's CPU in each large wave, the daemon's CPU over
# its passes, the daemon's and the manager's heap after the storms, the
# manager's CPU in its cold start).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "scale: run as root (the lab makes namespaces, mounts, cgroups)" >&2; exit 1; }

NODES=${NODES:-1000}
PODS=${PODS:-50000}
STATE=${STATE:-/var/lib/estuary-scale}
OUT=${OUT:-_output/scale}
start=$SECONDS

KWOK=$(bash hack/kwok.sh | tail -1)
mkdir -p bin "$OUT"
go build -o bin/estuary-lab ./cmd/estuary-lab
go build -o bin/estuary-scale ./cmd/estuary-scale
lab() { ./bin/estuary-lab --state-dir "$STATE" "$@"; }

lab up --cni estuary --nodes 1 --api-port "${API_PORT:-16447}" --control-plane-qps "${CONTROL_PLANE_QPS:-500}" --profiling
if [ "${KEEP:-0}" != 1 ]; then
  trap 'lab down' EXIT
fi
echo "scale: lab up after $((SECONDS - start)) s; $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -r)"

report="$OUT/report-$NODES-nodes-$PODS-pods.txt"
./bin/estuary-scale --kubeconfig "$STATE/kubeconfig" --nodes "$NODES" --pods "$PODS" \
  --pods-per-deployment "${PODS_PER_DEPLOYMENT:-100}" --timeout "${TIMEOUT:-2h}" --manager-qps "${MANAGER_QPS:-0}" \
  --manager-workers "${MANAGER_WORKERS:-0}" --records "${RECORDS:-100000}" --manager-memory "${MANAGER_MEMORY:-}" --profile-dir "$OUT" \
  --manager-watch-list="${MANAGER_WATCH_LIST:-false}" \
  --kwok "$KWOK" --kwok-stages "$(dirname "$KWOK")/stages.yaml" --kwok-log "$OUT/kwok.log" | tee "$report"
for p in "$OUT"/*.pprof; do
  [ -e "$p" ] || continue
  idx=""
  case "$p" in *-heap.pprof) idx=-sample_index=inuse_space ;; esac
  echo "== $p: top functions =="
  go tool pprof -top -nodecount=25 $idx "$p" 2>/dev/null | tee "${p%.pprof}.top.txt" | sed -n '1,35p'
done
echo "scale: done in $((SECONDS - start)) s; report in $report"
