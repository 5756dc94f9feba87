//go:build lab

// Package flannellab proves the lab's `--cni flannel`: a three-node lab
// running the real flanneld (VXLAN backend, Kubernetes subnet manager) gets
// pods Running on every node that reach each other across nodes, and every
// node's flannel.1 device, FDB, neighbour and route entries name the other
// nodes. It brings up and tears down its own lab, so run it alone, under the
// machine's lab lock:
//
//	flock /tmp/estuary-lab.lock go test -tags lab -timeout 30m -v ./test/infra/lab/flannellab/
//
// ESTUARY_FLANNEL_LAB_STATE (default /tmp/lab-flannel) and
// ESTUARY_FLANNEL_LAB_API_PORT (default 16447) choose the lab's state
// directory and host API port. It is in no make target.
package flannellab
