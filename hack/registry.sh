#!/usr/bin/env bash
# registry.sh installs the distribution registry (the reference OCI registry,
# github.com/distribution/distribution) at a pinned version into ./bin, built
# from the Go module proxy, unless it is already there. The binary is
# bin/registry-<version>; bin/registry links to it. `make registry` and
# docs/release.md use it to try a release against a local registry.
#
# Prints the binary's path on its last line.
# Environment: REGISTRY_VERSION (v3.1.2), BIN (<repo>/bin).
set -euo pipefail

REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
target="$BIN/registry-$REGISTRY_VERSION"
module=github.com/distribution/distribution/v3

mkdir -p "$BIN"
exec 9>"$BIN/.registry.lock"
flock 9

installed() {
  [ -x "$target" ] && go version -m "$target" 2>/dev/null |
    grep -Eq "^[[:space:]]+mod[[:space:]]+${module//./\\.}[[:space:]]+$REGISTRY_VERSION([[:space:]]|$)"
}

if ! installed; then
  printf '[registry] building the distribution registry %s (go install %s/cmd/registry@%s)\n' \
    "$REGISTRY_VERSION" "$module" "$REGISTRY_VERSION" >&2
  tmp=$(mktemp -d "$BIN/.registry-build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS= GOBIN="$tmp" \
    go install "$module/cmd/registry@$REGISTRY_VERSION")
  mv "$tmp/registry" "$target"
fi
ln -sfn "registry-$REGISTRY_VERSION" "$BIN/registry"
echo "$target"
