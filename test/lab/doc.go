//go:build lab

// Package lab holds the end-to-end tests that run on the lab cluster: they
// bring up real nodes (containerd, kubelet, kube-proxy) in network namespaces,
// run workloads across them, and prove that tearing the lab down leaves
// nothing behind: no process of the lab exists once down returns. They need
// root; `make test-lab` runs them.
package lab
