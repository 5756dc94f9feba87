// Package crd proves the generated CRDs against a real kube-apiserver
// (envtest with locally built binaries): every CEL and schema rule rejects
// what it must with a message that names the field, invalid writes change
// nothing, and the samples in config/samples are accepted.
package crd
