package release

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// SBOMSuffix ends the name of the CycloneDX SBOM written beside an artifact.
const SBOMSuffix = ".cdx.json"

// SBOMSpec is the CycloneDX version the SBOMs are written in.
const SBOMSpec = cdx.SpecVersion1_6

// Binary is a Go binary an artifact holds.
type Binary struct {
	Source   string // the file on this machine
	Path     string // its path in the artifact, e.g. /estuary-daemon
	Platform Platform
}

// Subject is the artifact an SBOM describes: an image index or an archive.
type Subject struct {
	Name    string
	Version string
	Type    cdx.ComponentType // cdx.ComponentTypeContainer or cdx.ComponentTypeFile
	Digest  string            // sha256:<hex> of the index or the archive
	PURL    string            // empty for an archive
}

// ReadBuildInfo reads the build information a Go binary embeds.
type ReadBuildInfo func(path string) (*debug.BuildInfo, error)

// SBOM returns the CycloneDX BOM of subject, which holds bins (read with
// read): one application component per binary (its SHA-256, Go version,
// platform and build settings), and one library component per Go module
// linked into any of them (the main module and every dependency, after
// replacements) with its purl, pkg:golang/<module>@<version>, and the
// SHA-256 of the go.sum h1 hash when the binary records one. A main module
// without a version, as estuary's own commands are built, is given
// mainVersion. The BOM is dated created, so a rebuild gives the same file.
func SBOM(subject Subject, bins []Binary, read ReadBuildInfo, mainVersion string, created time.Time) (*cdx.BOM, error) {
	bom := cdx.NewBOM()
	subjectRef := subject.Name + "@" + subject.Digest
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &cdx.Component{
			BOMRef: subjectRef, Type: subject.Type, Name: subject.Name, Version: subject.Version, PackageURL: subject.PURL,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: strings.TrimPrefix(subject.Digest, "sha256:")}},
		},
	}
	modules := map[string]cdx.Component{}
	var components []cdx.Component
	deps := []cdx.Dependency{}
	var binRefs []string
	for _, b := range bins {
		info, err := read(b.Source)
		if err != nil {
			return nil, fmt.Errorf("SBOM of %s: build info of %s (%s): %w", subject.Name, b.Path, b.Platform, err)
		}
		c, mods, err := binaryComponent(b, info, mainVersion)
		if err != nil {
			return nil, fmt.Errorf("SBOM of %s: %w", subject.Name, err)
		}
		var refs []string
		for _, m := range mods {
			modules[m.BOMRef] = m
			refs = append(refs, m.BOMRef)
		}
		components = append(components, c)
		binRefs = append(binRefs, c.BOMRef)
		deps = append(deps, cdx.Dependency{Ref: c.BOMRef, Dependencies: &refs})
	}
	refs := make([]string, 0, len(modules))
	for ref := range modules {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		components = append(components, modules[ref])
		deps = append(deps, cdx.Dependency{Ref: ref})
	}
	deps = append([]cdx.Dependency{{Ref: subjectRef, Dependencies: &binRefs}}, deps...)
	bom.Components, bom.Dependencies = &components, &deps
	return bom, nil
}

// binaryComponent returns the component of one binary and those of the
// modules linked into it.
func binaryComponent(b Binary, info *debug.BuildInfo, mainVersion string) (cdx.Component, []cdx.Component, error) {
	sum, err := FileSHA256(b.Source)
	if err != nil {
		return cdx.Component{}, nil, err
	}
	main := info.Main
	if main.Version == "" || main.Version == "(devel)" {
		main.Version = mainVersion
	}
	props := []cdx.Property{{Name: "estuary:platform", Value: b.Platform.String()}, {Name: "estuary:go:version", Value: info.GoVersion},
		{Name: "estuary:go:package", Value: info.Path}}
	for _, s := range info.Settings {
		props = append(props, cdx.Property{Name: "estuary:go:setting:" + s.Key, Value: s.Value})
	}
	c := cdx.Component{
		BOMRef: b.Platform.String() + ":" + b.Path, Type: cdx.ComponentTypeApplication, Name: filepath.Base(b.Path),
		Version: main.Version, Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: sum}}, Properties: &props,
	}
	mods := []cdx.Component{moduleComponent(&main)}
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		mods = append(mods, moduleComponent(d))
	}
	return c, mods, nil
}

// moduleComponent is the library component of one Go module.
func moduleComponent(m *debug.Module) cdx.Component {
	purl := GoModulePURL(m.Path, m.Version)
	c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl}
	if h, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
		if raw, err := base64.StdEncoding.DecodeString(h); err == nil && len(raw) == sha256.Size {
			c.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(raw)}}
		}
	}
	return c
}

// GoModulePURL is the package URL of a Go module: pkg:golang/<path>@<version>.
func GoModulePURL(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "pkg:golang/" + strings.Join(segs, "/") + "@" + purlEscape(version)
}

// purlEscape percent-encodes a purl version (':' too, as the purl spec
// writes a digest: sha256%3A...).
func purlEscape(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), ":", "%3A")
}

// OCIPURL is the package URL of an image in repository (host/path/name) by
// digest: pkg:oci/<name>@<digest>?repository_url=<repository>.
func OCIPURL(repository, digest string) string {
	purl := "pkg:oci/" + url.PathEscape(filepath.Base(repository)) + "@" + purlEscape(digest)
	if strings.Contains(repository, "/") {
		purl += "?repository_url=" + url.QueryEscape(repository)
	}
	return purl
}

// WriteSBOM writes bom as CycloneDX JSON to path.
func WriteSBOM(path string, bom *cdx.BOM) error {
	f, err := os.Create(filepath.Clean(path))
	if err != nil {
		return fmt.Errorf("write SBOM: %w", err)
	}
	enc := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true)
	if err := enc.EncodeVersion(bom, SBOMSpec); err != nil {
		_ = f.Close()
		return fmt.Errorf("encode SBOM %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write SBOM %s: %w", path, err)
	}
	return nil
}

// readBuildInfo is the default ReadBuildInfo.
func readBuildInfo(path string) (*debug.BuildInfo, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read Go build info: %w", err)
	}
	return info, nil
}

// FileSHA256 is the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
