#!/usr/bin/env bash
# bench-cni.sh runs BenchmarkCNIAdd (test/integration/bench_test.go): CNI ADD (and
# DEL) latency on one node, the real estuary-cni binary and daemon against the
# reference ptp + host-local chain from /usr/lib/cni, measured in the same run.
# It needs root, Debian's containernetworking-plugins, and kube-apiserver and
# etcd, which hack/kube-binaries.sh builds or takes from its cache.
#
# Usage: hack/bench-cni.sh [extra go test flags]
# Environment: COUNT (3), the number of runs of each sub-benchmark;
#              BENCH_OUT, a file that keeps the raw go test output;
#              BENCH_POLICY=1, the daemon enforces network policy and every
#              pod's namespace has an ingress default-deny NetworkPolicy.
# Prints the go test output, then the median (min-max) of each metric over the
# runs. Docs: docs/benchmarks.md, "CNI ADD latency".
set -euo pipefail
cd "$(dirname "$0")/.."

count=${COUNT:-3}
assets=$(bash hack/kube-binaries.sh kube-apiserver kubectl etcd | tail -n 1)
out=${BENCH_OUT:-$(mktemp)}
[ -n "${BENCH_OUT:-}" ] || trap 'rm -f "$out"' EXIT

echo "$(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), nproc $(nproc), $(uname -r)"
KUBEBUILDER_ASSETS=$assets go test -tags integration -run '^$' -bench BenchmarkCNIAdd \
  -benchtime 1x -count "$count" "$@" ./test/integration/ | tee "$out"
echo "$(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"

# One line per benchmark and metric: median (min-max) over the runs.
echo
echo "summary over $count runs: median (min-max)"
awk '$1 ~ /^BenchmarkCNIAdd\// {
       for (i = 3; i + 1 <= NF; i += 2) if ($(i + 1) != "ns/op") print $1, $(i + 1), $i
     }' "$out" |
  sort -k1,1 -k2,2 -k3,3g |
  awk '{ key = $1 " " $2; if (key != last && last != "") emit(); if (key != last) n = 0; last = key; v[++n] = $3 }
       END { if (last != "") emit() }
       function emit(   m, parts) {
         m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
         split(last, parts, " ")
         printf "  %-32s %-16s %9.3f (%.3f-%.3f)\n", parts[1], parts[2], m, v[1], v[n]
       }'
