#!/usr/bin/env bash
# kube-binaries.sh builds Kubernetes and etcd binaries at pinned versions from the Go
# module proxy into a cache outside the repository, keyed by version, and reuses them
# when they are already there. envtest and the lab both take their binaries from here.
#
# Usage: hack/kube-binaries.sh [COMPONENT...]
#   COMPONENT: kube-apiserver kubectl etcd kubelet kube-controller-manager
#              kube-scheduler kube-proxy agnhost (default: kube-apiserver kubectl etcd)
#   agnhost is the Kubernetes e2e test image binary (k8s.io/kubernetes/test/images/agnhost),
#   built static from the same scratch module; the lab packs it into a local image.
# Prints the directory that holds the binaries on its last line.
#
# Environment: KUBE_VERSION (v1.36.3), ETCD_VERSION (v3.6.5),
#              ESTUARY_CACHE (/var/cache/estuary).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
CACHE=${ESTUARY_CACHE:-/var/cache/estuary}
BIN="$CACHE/kube/$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
WORK="$CACHE/kube/$KUBE_VERSION-etcd-$ETCD_VERSION/src"
components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver kubectl etcd)

log() { printf '[kube-binaries] %s\n' "$*" >&2; }

mkdir -p "$BIN" "$WORK"
exec 9>"$CACHE/kube/.lock"
flock 9

missing=()
for c in "${components[@]}"; do
  case "$c" in
    kube-apiserver|kubectl|etcd|kubelet|kube-controller-manager|kube-scheduler|kube-proxy|agnhost) ;;
    *) log "unknown component '$c'"; exit 2 ;;
  esac
  [ -x "$BIN/$c" ] || missing+=("$c")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$BIN"
  exit 0
fi

export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

build_kube() {
  local dir="$WORK/kubernetes"
  mkdir -p "$dir"
  if [ ! -f "$dir/.ready" ]; then
    log "preparing scratch module for k8s.io/kubernetes@$KUBE_VERSION"
    local gomod
    gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    local staging_version="v0${KUBE_VERSION#v1}"
    {
      echo "module estuary.local/kubebuild"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes $KUBE_VERSION"
      echo
      grep -E '=> \./staging/' "$gomod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
    } > "$dir/go.mod"
    cat > "$dir/tools.go" <<'GO'
//go:build tools

package kubebuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
GO
    (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
    (cd "$dir" && go mod download)
    touch "$dir/.ready"
  fi
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ld+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  ld+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  local c=$1 start=$SECONDS pkg="k8s.io/kubernetes/cmd/$1"
  [ "$c" = agnhost ] && pkg=k8s.io/kubernetes/test/images/agnhost
  log "building $c $KUBE_VERSION"
  (cd "$dir" && go build -trimpath -ldflags "$ld" -o "$BIN/.$c.tmp" "$pkg")
  mv "$BIN/.$c.tmp" "$BIN/$c"
  log "built $c in $((SECONDS - start))s"
}

build_etcd() {
  local dir="$WORK/etcd" start=$SECONDS
  mkdir -p "$dir"
  log "building etcd $ETCD_VERSION"
  {
    echo "module estuary.local/etcdbuild"
    echo
    echo "go 1.26"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo
    for m in api client/pkg client pkg; do
      echo "replace go.etcd.io/etcd/$m/v3 => go.etcd.io/etcd/$m/v3 $ETCD_VERSION"
    done
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<'GO'
//go:build tools

package etcdbuild

import _ "go.etcd.io/etcd/server/v3"
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/.etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/.etcd.tmp" "$BIN/etcd"
  log "built etcd in $((SECONDS - start))s"
}

for c in "${missing[@]}"; do
  if [ "$c" = etcd ]; then build_etcd; else build_kube "$c"; fi
done
echo "$BIN"
