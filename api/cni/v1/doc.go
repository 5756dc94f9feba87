// Package cniv1 owns the gRPC protocol between the estuary-cni binary and the
// estuary daemon: cni.proto and the Go code generated from it by
// hack/gen-proto.sh.
package cniv1
