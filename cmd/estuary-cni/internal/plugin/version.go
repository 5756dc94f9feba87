package plugin

import (
	"encoding/json"
	"io"

	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/estuary-cni/estuary/internal/version"
)

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = []string{"1.0.0", "1.1.0"}

// VersionInfo is the plugin's answer to the VERSION verb: the spec's
// cniVersion and supportedVersions, and estuary's own version beside them
// (runtimes decode the spec's fields and ignore the others).
type VersionInfo struct {
	cniversion.PluginInfo
	// Estuary is the version the binary was built as.
	Estuary version.Info
}

// NewVersionInfo returns the VERSION answer of this binary.
func NewVersionInfo() VersionInfo {
	return VersionInfo{PluginInfo: cniversion.PluginSupports(SupportedVersions...), Estuary: version.Get()}
}

// Encode writes the VERSION answer as JSON.
func (v VersionInfo) Encode(w io.Writer) error {
	return json.NewEncoder(w).Encode(struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
		EstuaryVersion    string   `json:"estuaryVersion"`
		GitCommit         string   `json:"gitCommit"`
	}{cniversion.Current(), v.SupportedVersions(), v.Estuary.Version, v.Estuary.GitCommit})
}

// About is the line `estuary-cni --version` prints.
func About() string { return "CNI plugin " + version.Line("estuary-cni") }
