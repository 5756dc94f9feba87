// Package integration tests the whole node path of estuary against a real
// kube-apiserver (envtest) and the real kernel, without a kubelet: the
// manager's pod IPAM controllers run in-process, the node daemon runs with
// a fake host network namespace, and the real estuary-cni binary is executed
// as a container runtime would.
//
// The tests carry the build tag integration, need root and KUBEBUILDER_ASSETS:
//
//	KUBEBUILDER_ASSETS=<dir with etcd and kube-apiserver> \
//	    go test -tags integration -count=1 ./test/integration/...
package integration
