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
