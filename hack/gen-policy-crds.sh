#!/usr/bin/env bash
# gen-policy-crds.sh copies the ClusterNetworkPolicy CRD
# (policy.networking.k8s.io) of the sigs.k8s.io/network-policy-api version
# go.mod requires into config/crd/ (embedded in the manager, which upgrades
# it: internal/crdupgrade) and charts/estuary/crds/ (installed by Helm on
# the first install). The copy is upstream's standard-channel file with one
# annotation added, networking.estuary.io/policy-api:
# sigs.k8s.io/network-policy-api@<version>, by which the manager recognises a
# CRD estuary installed; upstream's own annotations (bundle-version, channel,
# api-approved) are kept as they are. Run by `make generate`.
#
# It also generates, with controller-gen ($CONTROLLER_GEN), the CRDs of the
# module's v1alpha1 AdminNetworkPolicy and BaselineAdminNetworkPolicy, which
# upstream no longer ships, into test/crd/policy-v1alpha1/: tests load them
# (the daemon reads both kinds when served); the chart never installs them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

module=sigs.k8s.io/network-policy-api
file=policy.networking.k8s.io_clusternetworkpolicies.yaml
annotation=networking.estuary.io/policy-api

version=$(go list -m -f '{{.Version}}' "$module")
dir=$(go list -m -f '{{.Dir}}' "$module")
if [ -z "$dir" ]; then
  go mod download "$module"
  dir=$(go list -m -f '{{.Dir}}' "$module")
fi
src="$dir/config/crd/standard/$file"
[ -f "$src" ] || { echo "gen-policy-crds: $src not found ($module@$version)" >&2; exit 1; }

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Insert the annotation as the first entry of metadata.annotations; fail
# when upstream's layout (a metadata block with an annotations map) changed.
awk -v line="    $annotation: $module@$version" '
  /^metadata:$/ { inmeta = 1; print; next }
  inmeta && /^  annotations:$/ { print; print line; done = 1; inmeta = 0; next }
  /^[^ ]/ { inmeta = 0 }
  { print }
  END { if (!done) exit 3 }
' "$src" >"$tmp" || { echo "gen-policy-crds: $src has no metadata.annotations block" >&2; exit 1; }
if ! grep -q '^    policy.networking.k8s.io/bundle-version: ' "$tmp"; then
  echo "gen-policy-crds: $src carries no policy.networking.k8s.io/bundle-version annotation" >&2
  exit 1
fi

for out in config/crd charts/estuary/crds; do
  install -m 0644 "$tmp" "$out/$file"
done
echo "gen-policy-crds: $file from $module@$version"

# v1alpha1, for tests. A CRD of a *.k8s.io group needs the
# api-approved.kubernetes.io annotation; upstream's v0.1.x CRDs carried
# this one.
: "${CONTROLLER_GEN:?set CONTROLLER_GEN to controller-gen (make generate does)}"
v1alpha1=test/crd/policy-v1alpha1
gen=$(mktemp -d)
trap 'rm -rf "$tmp" "$gen"' EXIT
(cd "$dir" && "$CONTROLLER_GEN" crd paths=./apis/v1alpha1/... output:crd:artifacts:config="$gen")
mkdir -p "$v1alpha1"
# The CEL rule on each network's CIDR is dropped: under the v1alpha1
# schema's list bounds its estimated cost exceeds the budget of current API
# servers, which refuse the CRD (a CIDR that is not one is then the
# daemon's problem to report, as for an object that predates validation).
for f in "$gen"/*.yaml; do
  sed 's|^    controller-gen.kubebuilder.io/version: .*|&\n    api-approved.kubernetes.io: https://github.com/kubernetes-sigs/network-policy-api/pull/30|' "$f" |
    perl -0pe 's/\n *x-kubernetes-validations:\n *- message: Invalid CIDR format provided\n *rule: isCIDR\(self\) && cidr\(self\) == cidr\(self\)\.masked\(\)//g' \
    >"$v1alpha1/$(basename "$f")"
  grep -q '^    api-approved.kubernetes.io: ' "$v1alpha1/$(basename "$f")" ||
    { echo "gen-policy-crds: $f has no controller-gen annotation to follow" >&2; exit 1; }
done
echo "gen-policy-crds: v1alpha1 CRDs from $module@$version into $v1alpha1"
