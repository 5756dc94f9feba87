#!/usr/bin/env bash
# helm.sh installs helm at a pinned version into ./bin, built from the Go module proxy
# (nothing else is downloaded), unless it is already there. The binary is
# bin/helm-<version>; bin/helm links to it. The lab and `make helm` use this script.
#
# Prints the binary's path on its last line.
# Environment: HELM_VERSION (v3.22.0), BIN (<repo>/bin).
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v3.22.0}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
target="$BIN/helm-$HELM_VERSION"

mkdir -p "$BIN"
exec 9>"$BIN/.helm.lock"
flock 9

installed() {
  [ -x "$target" ] && go version -m "$target" 2>/dev/null |
    grep -Eq "^[[:space:]]+mod[[:space:]]+helm\.sh/helm/v3[[:space:]]+$HELM_VERSION([[:space:]]|$)"
}

if ! installed; then
  printf '[helm] building helm %s (go install helm.sh/helm/v3/cmd/helm@%s)\n' "$HELM_VERSION" "$HELM_VERSION" >&2
  tmp=$(mktemp -d "$BIN/.helm-build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS= GOBIN="$tmp" \
    go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
  mv "$tmp/helm" "$target"
fi
ln -sfn "helm-$HELM_VERSION" "$BIN/helm"
echo "$target"
