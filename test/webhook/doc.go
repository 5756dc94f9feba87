// Package webhook proves estuary's admission webhook against a real
// kube-apiserver (envtest with locally built binaries): a controller-runtime
// manager serves internal/webhook on a certificate envtest generates at run
// time, the API server calls it for Networks, Subnets and pods, every broken
// cross-object rule is refused with a message that names the object and the
// field and changes nothing, valid objects are admitted, and Underlay pods
// get their domain's node affinity merged into their own.
package webhook
