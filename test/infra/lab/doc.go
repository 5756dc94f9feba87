// Package lab owns the estuary lab: a multi-node Kubernetes cluster built on one
// machine out of network namespaces, per-node mount namespaces, containerd, kubelet
// and a control plane. It plans the topology (plan.go), brings it up step by step
// (up.go), reports it (status.go) and removes every trace of it (down.go).
//
// Subpackages hold the pieces that do not depend on the orchestration:
// netlab (namespaces, links, routes), pki (CA and kubeconfigs), render (config
// files), proc (detached processes and cgroups), images (local image tarballs)
// and nodens (the per-node mount namespace).
package lab
