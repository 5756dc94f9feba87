// Package crd embeds estuary's CustomResourceDefinitions as controller-gen
// generates them from api/v1 (make generate), and the ClusterNetworkPolicy
// CRD of sigs.k8s.io/network-policy-api that the chart installs
// (hack/gen-policy-crds.sh), so that the manager can bring the cluster's
// CRDs to its own schema (internal/crdupgrade).
package crd

import "embed"

// Files holds the generated CRD manifests, one per file.
//
//go:embed networking.estuary.io_*.yaml
var Files embed.FS

// Policy holds the network-policy-api CRDs the chart installs, one per
// file, each carrying the networking.estuary.io/policy-api annotation.
//
//go:embed policy.networking.k8s.io_*.yaml
var Policy embed.FS
