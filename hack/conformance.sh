#!/usr/bin/env bash
# conformance.sh runs the upstream Kubernetes e2e tests on a fresh estuary lab:
# it builds e2e.test of the pinned Kubernetes version from the Go module proxy
# (hack/kube-binaries.sh, cached), brings up a lab with estuary installed from
# the chart, runs `estuary-lab conformance` (every [sig-network] [Conformance]
# spec that is not [Serial], [Disruptive], [Slow] or a [Feature:...]), prints
# each spec's result and "N passed, N failed", and removes the lab.
# IP_FAMILY=dual brings up a dual-stack lab and runs the dual-stack specs
# instead (`estuary-lab conformance --dual-stack`: [Feature:IPv6DualStack] and
# the Networking Granular Checks).
# NETPOL=1 (make conformance-netpol) runs every NetworkPolicy spec (the Netpol
# suite) that fits the lab instead (`estuary-lab conformance --network-policy`),
# listing each one it leaves out with the reason; on a lab of any IP_FAMILY (the
# specs probe each Service's first-family ClusterIP).
# CNP=1 (make conformance-cnp) runs sigs.k8s.io/network-policy-api's own
# conformance suite, profile ClusterNetworkPolicy, instead: go test's
# TestClusterNetworkPolicyConformance (test/e2e, tag lab) against the lab
# (ESTUARY_E2E_REUSE), CNP_TESTS choosing the tests (all; or ShortNames
# separated by commas; empty: the make test subset), the suite's report in
# $REPORT_DIR/report.yaml. The chart installs the ClusterNetworkPolicy CRD
# from its crds/.
#
# Environment: NODES (3), IP_FAMILY (ipv4; dual, ipv6), ALL=1 (every
# [sig-network] spec the skip lets through, not only [Conformance]), NETPOL=1,
# CNP=1, CNP_TESTS (all),
# FOCUS (a ginkgo focus instead), PARALLEL (1: that many e2e.test processes at
# once, each with its share of the specs), KEEP=1 (leave the lab up),
# REPORT_DIR (_output/conformance; _output/conformance-netpol with NETPOL=1,
# _output/conformance-cnp with CNP=1),
# STATE (/var/lib/estuary-conformance), API_PORT (16447).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "conformance: run as root (the lab makes namespaces, mounts, cgroups)" >&2; exit 1; }

STATE=${STATE:-/var/lib/estuary-conformance}
report_default=_output/conformance
[ "${NETPOL:-0}" = 1 ] && report_default=_output/conformance-netpol
[ "${CNP:-0}" = 1 ] && report_default=_output/conformance-cnp
REPORT_DIR=${REPORT_DIR:-$report_default}
start=$SECONDS

if [ "${CNP:-0}" = 1 ]; then
  BIN=$(bash hack/kube-binaries.sh kubectl | tail -1)
else
  BIN=$(bash hack/kube-binaries.sh e2e.test kubectl | tail -1)
fi
mkdir -p bin
go build -o bin/estuary-lab ./cmd/estuary-lab
lab() { ./bin/estuary-lab --state-dir "$STATE" "$@"; }

IP_FAMILY=${IP_FAMILY:-ipv4}
lab up --cni estuary --nodes "${NODES:-3}" --api-port "${API_PORT:-16447}" --ip-family "$IP_FAMILY"
if [ "${KEEP:-0}" != 1 ]; then
  trap 'lab down' EXIT
fi

if [ "${CNP:-0}" = 1 ]; then
  mkdir -p "$REPORT_DIR"
  rc=0
  ESTUARY_E2E_REUSE="$STATE" ESTUARY_CNP_TESTS="${CNP_TESTS-all}" ESTUARY_CNP_REPORT="$(realpath "$REPORT_DIR")/report.yaml" \
    go test -count=1 -tags lab -timeout 90m -v -run '^TestClusterNetworkPolicyConformance$' ./test/e2e/ 2>&1 |
    tee "$REPORT_DIR/go-test.log" || rc=$?
  grep -E 'profile ClusterNetworkPolicy' "$REPORT_DIR/go-test.log" | sed 's/^ *//' || true
  echo "conformance: finished in $((SECONDS - start))s (lab up included); report in $REPORT_DIR/report.yaml"
  exit $rc
fi

args=(--e2e-test "$BIN/e2e.test" --report-dir "$REPORT_DIR")
[ "${ALL:-0}" = 1 ] && args+=(--all-network)
[ "${NETPOL:-0}" = 1 ] && args+=(--network-policy)
[ "$IP_FAMILY" = dual ] && [ "${NETPOL:-0}" != 1 ] && args+=(--dual-stack)
[ -n "${FOCUS:-}" ] && args+=(--focus "$FOCUS")
[ "${PARALLEL:-1}" != 1 ] && args+=(--parallel "$PARALLEL")
rc=0
lab conformance "${args[@]}" || rc=$?
echo "conformance: finished in $((SECONDS - start))s (lab up included); report in $REPORT_DIR/report.json"
exit $rc
