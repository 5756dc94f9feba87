package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// PluginName is the kubectl plugin's binary, and KrewName its name in krew.
// CompletionName is the executable kubectl (1.26 or later) runs to complete
// `kubectl estuary ...` when it is on the PATH; completionScript is it.
const (
	PluginName       = "kubectl-estuary"
	KrewName         = "estuary"
	CompletionName   = "kubectl_complete-estuary"
	completionScript = "#!/bin/sh\n# kubectl runs this to complete `kubectl estuary ...`; put it on the PATH beside kubectl-estuary.\nexec kubectl-estuary __complete \"$@\"\n"
)

// Archive is a tar.gz of the kubectl plugin for one platform.
type Archive struct {
	Platform Platform
	Path     string
	SHA256   string // hex
	SBOM     string // its CycloneDX SBOM, beside it; empty: none
}

// ArchiveName is the file name of the plugin's archive for p.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", PluginName, version, p.OS, p.Arch)
}

// WritePluginArchive writes outDir/ArchiveName holding the plugin binary at
// bin, its completion script and the licence at license, each entry dated
// created (so a rebuild of one commit gives the same archive), and returns
// it with its checksum.
func WritePluginArchive(outDir, version string, p Platform, bin, license string, created time.Time) (Archive, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		src, name string
		mode      int64
	}{{bin, PluginName, 0o755}, {"", CompletionName, 0o755}, {license, "LICENSE", 0o644}} {
		data := []byte(completionScript)
		if f.src != "" {
			var err error
			if data, err = os.ReadFile(filepath.Clean(f.src)); err != nil {
				return Archive{}, fmt.Errorf("plugin archive for %s: %w", p, err)
			}
		}
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: created.UTC()}
		if err := writeEntry(tw, hdr, data); err != nil {
			return Archive{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return Archive{}, fmt.Errorf("close tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return Archive{}, fmt.Errorf("close gzip: %w", err)
	}
	a := Archive{Platform: p, Path: filepath.Join(outDir, ArchiveName(version, p))}
	sum := sha256.Sum256(buf.Bytes())
	a.SHA256 = hex.EncodeToString(sum[:])
	if err := os.WriteFile(a.Path, buf.Bytes(), 0o644); err != nil { //nolint:gosec // G306: a published file
		return Archive{}, fmt.Errorf("write %s: %w", a.Path, err)
	}
	return a, nil
}

// WriteChecksums writes the SHA-256 sums of the archives and their SBOMs
// in sha256sum's format (`sha256sum -c` checks them) to path.
func WriteChecksums(path string, archives []Archive) error {
	var b strings.Builder
	for _, a := range archives {
		fmt.Fprintf(&b, "%s  %s\n", a.SHA256, filepath.Base(a.Path))
		if a.SBOM == "" {
			continue
		}
		sum, err := FileSHA256(a.SBOM)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, filepath.Base(a.SBOM))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil { //nolint:gosec // G306: a published file
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// KrewPlugin is a krew plugin manifest
// (krew.googlecontainertools.github.com/v1alpha2 Plugin).
type KrewPlugin struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   KrewMetadata `json:"metadata"`
	Spec       KrewSpec     `json:"spec"`
}

// KrewMetadata names the plugin.
type KrewMetadata struct {
	Name string `json:"name"`
}

// KrewSpec is the plugin's version, description and one entry per platform.
type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is where krew downloads the plugin for one os/arch.
type KrewPlatform struct {
	Selector KrewSelector `json:"selector"`
	URI      string       `json:"uri"`
	SHA256   string       `json:"sha256"`
	Files    []KrewFile   `json:"files"`
	Bin      string       `json:"bin"`
}

// KrewSelector matches a platform by the os and arch labels krew sets.
type KrewSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// KrewFile is a file krew copies out of the archive.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// KrewManifest returns the krew manifest of version whose archives are
// downloaded from downloadURL/<archive name>.
func KrewManifest(version, homepage, downloadURL string, archives []Archive) KrewPlugin {
	m := KrewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   KrewMetadata{Name: KrewName},
		Spec: KrewSpec{
			Version:          "v" + version,
			Homepage:         homepage,
			ShortDescription: "See and repair estuary's pod addresses",
			Description: "Shows who holds a pod address of the estuary CNI plugin and what a workload holds, how full\n" +
				"each subnet is; reserves addresses for a workload, releases an address, and checks and repairs\n" +
				"the address records against the cluster's pods and nodes.\n",
		},
	}
	for _, a := range archives {
		m.Spec.Platforms = append(m.Spec.Platforms, KrewPlatform{
			Selector: KrewSelector{MatchLabels: map[string]string{"os": a.Platform.OS, "arch": a.Platform.Arch}},
			URI:      strings.TrimSuffix(downloadURL, "/") + "/" + filepath.Base(a.Path),
			SHA256:   a.SHA256,
			Files:    []KrewFile{{From: PluginName, To: "."}, {From: CompletionName, To: "."}, {From: "LICENSE", To: "."}},
			Bin:      PluginName,
		})
	}
	return m
}

// WriteKrewManifest writes m as YAML to path.
func WriteKrewManifest(path string, m KrewPlugin) error {
	b, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode krew manifest: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil { //nolint:gosec // G306: a published file
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
