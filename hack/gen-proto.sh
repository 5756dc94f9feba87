#!/usr/bin/env bash
# gen-proto.sh regenerates the Go code for api/cni/v1/cni.proto. The protoc
# plugins are installed at pinned versions into ./bin; protoc itself comes
# from the system (Debian: apt-get install protobuf-compiler).
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin"

if ! command -v protoc >/dev/null 2>&1; then
  echo "gen-proto: protoc not found; install it (Debian: apt-get install -y protobuf-compiler)" >&2
  exit 1
fi

install_plugin() { # name module version
  local name=$1 module=$2 version=$3 pinned="$bin/$1-$3"
  if [ ! -x "$pinned" ]; then
    mkdir -p "$bin"
    GOBIN="$bin" go install "$module@$version"
    mv "$bin/$name" "$pinned"
  fi
  ln -sf "$(basename "$pinned")" "$bin/$name"
}

install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

cd "$root"
PATH="$bin:$PATH" protoc \
  --proto_path=. \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  api/cni/v1/cni.proto
echo "gen-proto: generated api/cni/v1 with $(protoc --version)"
