#!/usr/bin/env bash
# bench-cpu.sh shows where the machine's CPU goes while a Deployment of PODS
# pause pods starts and goes (hack/lib/podstorm.sh: created, all Running,
# deleted, sandboxes removed from the nodes), on a fresh 3-node `--cni bridge`
# lab and then a fresh 3-node `--cni estuary` lab: `perf record -e cpu-clock`
# samples every CPU 199 times a second for the whole storm, and the table
# gives each command's CPU-seconds on both labs. Short-lived processes count
# under their own command (the CNI plugins, iptables, runc), so the CNI
# chain's cost is the sum of its plugins' rows plus estuary's daemon and
# manager. The idle task (swapper) is left out.
#
# Needs root, perf (linux-perf) and the machine to itself: each `up` replaces
# any lab already running. Environment: PODS (100), TOP (25 rows),
# ESTUARY_LAB_STATE (default: a temporary dir).
set -euo pipefail
cd "$(dirname "$0")/.."

TOP=${TOP:-25}
HZ=199

die() { echo "bench-cpu: $*" >&2; exit 1; }
command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh
# shellcheck source=hack/lib/podstorm.sh
source hack/lib/podstorm.sh
bench_setup
WORK=$(mktemp -d /tmp/estuary-bench-cpu.XXXXXX)
trap '"${LAB[@]}" down >/dev/null 2>&1 || true' EXIT

# profile CNI: up a lab with CNI, run one storm under perf; writes
# WORK/CNI.comm (command, CPU-seconds) and prints the storm's seconds.
profile() {
  local cni=$1 perf_pid secs
  echo "bench-cpu: up --cni $cni --nodes $NODES" >&2
  "${LAB[@]}" up --cni "$cni" --nodes "$NODES" >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "up --cni $cni failed"; }
  KBIN=$("${LAB[@]}" status -o json | jq -r .binDir)
  perf record -q -e cpu-clock -F "$HZ" -a -o "$WORK/$cni.data" >/dev/null 2>&1 &
  perf_pid=$!
  secs=$(create_run)
  kill -INT "$perf_pid"
  wait "$perf_pid" || true
  perf report -i "$WORK/$cni.data" --sort comm --stdio -n 2>/dev/null |
    awk -v hz="$HZ" '$1 ~ /%$/ {
      i = 1; while ($i ~ /%$/) i++
      n = $i; c = $(i + 1); for (j = i + 2; j <= NF; j++) c = c " " $j
      if (c != "swapper") printf "%s\t%.1f\n", c, n / hz
    }' >"$WORK/$cni.comm"
  echo "$secs"
}

cpu_of() { awk -F'\t' -v c="$2" '$1 == c {print $2; found = 1} END {if (!found) print 0}' "$WORK/$1.comm"; }

TB=$(profile bridge)
TE=$(profile estuary)
cat <<MD

### Where the CPU goes: $PODS pods started and deleted, bridge vs estuary

Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores, Linux $(uname -r), 3 nodes.
Command: \`PODS=$PODS hack/bench-cpu.sh\`. Create to all Running: bridge $TB s, estuary $TE s.
CPU-seconds per command over the whole storm (create, Running, delete, sandboxes removed),
the $TOP largest on either lab:

| command | bridge (CPU-s) | estuary (CPU-s) |
| --- | --- | --- |
MD
cut -f1 "$WORK/bridge.comm" "$WORK/estuary.comm" | sort -u | while IFS= read -r c; do
  printf '%s\t%s\t%s\n' "$c" "$(cpu_of bridge "$c")" "$(cpu_of estuary "$c")"
done | awk -F'\t' '{m = $2 > $3 ? $2 : $3; print m "\t" $0}' | sort -t$'\t' -k1,1gr |
  awk -F'\t' -v top="$TOP" 'n++ < top {printf "| %s | %s | %s |\n", $2, $3, $4}'
