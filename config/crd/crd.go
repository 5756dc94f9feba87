// Package crd embeds estuary's CustomResourceDefinitions as controller-gen
// generates them from api/v1 (make generate), so that the manager can bring
// the cluster's CRDs to its own schema (internal/crdupgrade).
package crd

import "embed"

// Files holds the generated CRD manifests, one per file.
//
//go:embed networking.estuary.io_*.yaml
var Files embed.FS
