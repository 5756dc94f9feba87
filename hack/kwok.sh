#!/usr/bin/env bash
# kwok.sh builds the kwok controller (sigs.k8s.io/kwok/cmd/kwok) at a pinned version from
# the Go module proxy into a cache outside the repository, keyed by version, and reuses it
# when it is already there. make scale runs its fake nodes with it.
#
# Usage: hack/kwok.sh
# Also writes $BIN/stages.yaml, kwok's own default stages (what kwokctl gives a
# cluster: nodes Ready at once with a lease heartbeat, pods Running at once,
# deleted pods removed), taken from the module's kustomize/stage directory;
# the kwok binary reads stages only from --config.
# Prints the path of the kwok binary on its last line.
#
# Environment: KWOK_VERSION (v0.8.0), ESTUARY_CACHE (/var/cache/estuary).
set -euo pipefail

KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CACHE=${ESTUARY_CACHE:-/var/cache/estuary}
BIN="$CACHE/kwok/$KWOK_VERSION"

log() { printf '[kwok] %s\n' "$*" >&2; }

mkdir -p "$BIN"
exec 9>"$CACHE/kwok/.lock"
flock 9

if [ ! -x "$BIN/kwok" ]; then
  log "building sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION into $BIN (about 8 minutes on 2 cores)"
  start=$(date +%s)
  tmp=$(mktemp -d "$CACHE/kwok/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" GOTOOLCHAIN=local CGO_ENABLED=0 \
    go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mv "$tmp/kwok" "$BIN/kwok"
  log "built in $(( $(date +%s) - start )) s"
fi
if [ ! -s "$BIN/stages.yaml" ]; then
  dir=$(cd / && GOTOOLCHAIN=local go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -n "$dir" ] || { log "sigs.k8s.io/kwok@$KWOK_VERSION: no module directory"; exit 1; }
  st="$dir/kustomize/stage"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$st/$f"
  done > "$BIN/.stages.yaml.tmp"
  mv "$BIN/.stages.yaml.tmp" "$BIN/stages.yaml"
fi
echo "$BIN/kwok"
