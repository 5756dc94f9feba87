#!/usr/bin/env bash
# kube-binaries.sh builds Kubernetes, etcd and CoreDNS binaries at pinned versions from
# the Go module proxy into a cache outside the repository, keyed by version, and reuses
# them when they are already there. envtest and the lab both take their binaries from here.
#
# Usage: hack/kube-binaries.sh [COMPONENT...]
#   COMPONENT: kube-apiserver kubectl etcd kubelet kube-controller-manager
#              kube-scheduler kube-proxy kubeadm agnhost coredns e2e.test
#              kubeadm-etcd kubeadm-coredns
#              (default: kube-apiserver kubectl etcd)
#   agnhost is the Kubernetes e2e test image binary (k8s.io/kubernetes/test/images/agnhost),
#   built static from the same scratch module; the lab packs it into a local image.
#   coredns is github.com/coredns/coredns (every in-tree plugin, as the upstream image),
#   built static from its own scratch module; the lab packs it as its cluster DNS.
#   $BIN/.coredns-version records the version built; another COREDNS_VERSION rebuilds it.
#   kubeadm-etcd and kubeadm-coredns are etcd and CoreDNS at the versions kubeadm
#   $KUBE_VERSION deploys (`kubeadm config images list`), for the images a kubeadm
#   cluster runs; built as etcd and coredns are, each version recorded the same way.
#   e2e.test is the upstream end-to-end test binary (go test -c k8s.io/kubernetes/test/e2e),
#   built from a scratch module of its own (its test dependencies stay out of the others').
# Prints the directory that holds the binaries on its last line.
#
# Environment: KUBE_VERSION (v1.36.3), ETCD_VERSION (v3.6.5), COREDNS_VERSION (v1.15.0),
#              KUBEADM_ETCD_VERSION (v3.6.8), KUBEADM_COREDNS_VERSION (v1.14.2),
#              ESTUARY_CACHE (/var/cache/estuary).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
KUBEADM_ETCD_VERSION=${KUBEADM_ETCD_VERSION:-v3.6.8}
KUBEADM_COREDNS_VERSION=${KUBEADM_COREDNS_VERSION:-v1.14.2}
CACHE=${ESTUARY_CACHE:-/var/cache/estuary}
BIN="$CACHE/kube/$KUBE_VERSION-etcd-$ETCD_VERSION/bin"
WORK="$CACHE/kube/$KUBE_VERSION-etcd-$ETCD_VERSION/src"
components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver kubectl etcd)

log() { printf '[kube-binaries] %s\n' "$*" >&2; }

# pinned prints the version component $1 is built at when $BIN's name does not say it.
pinned() {
  case "$1" in
    coredns) echo "$COREDNS_VERSION" ;;
    kubeadm-etcd) echo "$KUBEADM_ETCD_VERSION" ;;
    kubeadm-coredns) echo "$KUBEADM_COREDNS_VERSION" ;;
  esac
}

# present tells whether component $1 is built (at its pinned version, recorded in $BIN/.$1-version).
present() {
  [ -x "$BIN/$1" ] || return 1
  local v; v=$(pinned "$1")
  [ -z "$v" ] || [ "$(cat "$BIN/.$1-version" 2>/dev/null)" = "$v" ]
}

mkdir -p "$BIN" "$WORK"
exec 9>"$CACHE/kube/.lock"
flock 9

missing=()
for c in "${components[@]}"; do
  case "$c" in
    kube-apiserver|kubectl|etcd|kubelet|kube-controller-manager|kube-scheduler|kube-proxy|kubeadm|agnhost|coredns|e2e.test) ;;
    kubeadm-etcd|kubeadm-coredns) ;;
    *) log "unknown component '$c'"; exit 2 ;;
  esac
  present "$c" || missing+=("$c")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "$BIN"
  exit 0
fi

export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

# kube_module writes, once, a scratch module in $1 that requires k8s.io/kubernetes at
# KUBE_VERSION (its staging modules pinned to the matching versions) and imports
# the packages named after it, and downloads what they need.
kube_module() {
  local dir=$1; shift
  mkdir -p "$dir"
  [ -f "$dir/.ready" ] && return 0
  log "preparing scratch module for k8s.io/kubernetes@$KUBE_VERSION in $dir"
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
  {
    printf '//go:build tools\n\npackage kubebuild\n\nimport (\n'
    for p in "$@"; do printf '\t_ "%s"\n' "$p"; done
    printf ')\n'
  } > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go mod download)
  touch "$dir/.ready"
}

kube_ldflags() {
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ld+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  ld+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  echo "$ld"
}

build_e2e() {
  local dir="$WORK/e2e" start=$SECONDS
  kube_module "$dir" k8s.io/kubernetes/test/e2e
  log "building e2e.test $KUBE_VERSION (go test -c; several minutes the first time)"
  (cd "$dir" && go test -c -trimpath -ldflags "$(kube_ldflags)" -o "$BIN/.e2e.test.tmp" k8s.io/kubernetes/test/e2e)
  mv "$BIN/.e2e.test.tmp" "$BIN/e2e.test"
  log "built e2e.test in $((SECONDS - start))s"
}

build_kube() {
  local dir="$WORK/kubernetes"
  kube_module "$dir" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/test/images/agnhost
  local ld c=$1 start=$SECONDS pkg="k8s.io/kubernetes/cmd/$1"
  [ "$c" = agnhost ] && pkg=k8s.io/kubernetes/test/images/agnhost
  ld=$(kube_ldflags)
  log "building $c $KUBE_VERSION"
  (cd "$dir" && go build -trimpath -ldflags "$ld" -o "$BIN/.$c.tmp" "$pkg")
  mv "$BIN/.$c.tmp" "$BIN/$c"
  log "built $c in $((SECONDS - start))s"
}

# build_etcd builds go.etcd.io/etcd/server/v3 at version $1 as $BIN/$2.
build_etcd() {
  local version=$1 out=$2 dir="$WORK/$2" start=$SECONDS
  mkdir -p "$dir"
  log "building $out $version"
  {
    echo "module estuary.local/etcdbuild"
    echo
    echo "go 1.26"
    echo
    echo "require go.etcd.io/etcd/server/v3 $version"
    echo
    for m in api client/pkg client pkg; do
      echo "replace go.etcd.io/etcd/$m/v3 => go.etcd.io/etcd/$m/v3 $version"
    done
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<'GO'
//go:build tools

package etcdbuild

import _ "go.etcd.io/etcd/server/v3"
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/.$out.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/.$out.tmp" "$BIN/$out"
  echo "$version" > "$BIN/.$out-version"
  log "built $out in $((SECONDS - start))s"
}

# build_coredns builds github.com/coredns/coredns at version $1 as $BIN/$2.
build_coredns() {
  local version=$1 out=$2 dir="$WORK/$2" start=$SECONDS
  mkdir -p "$dir"
  log "building $out $version"
  {
    echo "module estuary.local/corednsbuild"
    echo
    echo "go 1.26"
    echo
    echo "require github.com/coredns/coredns $version"
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<'GO'
//go:build tools

package corednsbuild

import _ "github.com/coredns/coredns"
GO
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/.$out.tmp" github.com/coredns/coredns)
  mv "$BIN/.$out.tmp" "$BIN/$out"
  echo "$version" > "$BIN/.$out-version"
  log "built $out in $((SECONDS - start))s"
}

for c in "${missing[@]}"; do
  case "$c" in
    etcd) build_etcd "$ETCD_VERSION" etcd ;;
    kubeadm-etcd) build_etcd "$KUBEADM_ETCD_VERSION" kubeadm-etcd ;;
    coredns) build_coredns "$COREDNS_VERSION" coredns ;;
    kubeadm-coredns) build_coredns "$KUBEADM_COREDNS_VERSION" kubeadm-coredns ;;
    e2e.test) build_e2e ;;
    *) build_kube "$c" ;;
  esac
done
echo "$BIN"
