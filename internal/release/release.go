// Package release cuts a release of estuary: it cross-compiles the binaries,
// builds the estuary-manager and estuary-daemon images for every image
// platform with go-containerregistry and gathers each into an OCI image
// index labelled with the OCI annotations, pushes the indexes to a registry
// (or writes OCI layouts), packages the Helm chart at the release's version
// with the registry as its images' default and pushes it as an OCI
// artifact, and writes kubectl-estuary archives per platform with their
// checksums and a krew manifest, and a CycloneDX SBOM of each image and
// archive read from the Go build information of the binaries it holds.
// cmd/estuary-release is its command line;
// docs/release.md says how to use it.
package release

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/estuary-cni/estuary/internal/cniplugins"
	"github.com/estuary-cni/estuary/internal/version"
)

// Defaults of Options.
const (
	DefaultSource   = "https://github.com/estuary-cni/estuary"
	DefaultLicenses = "Apache-2.0"
)

// Default platforms: the images', and the kubectl plugin's.
var (
	DefaultImagePlatforms  = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}
	DefaultPluginPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}
)

// The images of a release.
var (
	ManagerImage = ImageSpec{Name: "estuary-manager", Description: "estuary's IPAM manager (Kubernetes CNI plugin)",
		Entrypoint: []string{"/estuary-manager"}, User: "65532:65532", Values: "manager"}
	DaemonImage = ImageSpec{Name: "estuary-daemon", Values: "daemon",
		Description: "estuary's node daemon, the estuary-cni plugin and the reference CNI plugins it installs on nodes",
		Entrypoint:  []string{"/estuary-daemon"}}
)

// Options say what to release and where.
type Options struct {
	Version  string   // semantic version, without a leading v
	Registry Registry // empty Name: OCI layouts in Out, the chart not pushed
	Repo     string   // the checkout
	Out      string   // where archives, the chart, layouts and the krew manifest go
	Helm     Helm
	// Commit and Created identify the source: the OCI revision and created
	// labels, and the binaries' GitCommit and BuildDate.
	Commit  string
	Created time.Time
	Source  string // the repository's URL (org.opencontainers.image.source)
	// DownloadURL is where the kubectl-estuary archives are published; the
	// krew manifest points there.
	DownloadURL     string
	ImagePlatforms  []Platform
	PluginPlatforms []Platform
	// Builder builds the binaries; nil: GoBuilder stamped with Version,
	// Commit and Created, adding Tags.
	Builder Builder
	// Tags are build tags added to every command of the default Builder:
	// the lab's release adds faultinject for its fault tests; a release
	// (cmd/estuary-release) adds none.
	Tags []string
	// BuildInfo reads a built binary's Go build information for its SBOM;
	// nil: debug/buildinfo.ReadFile.
	BuildInfo ReadBuildInfo
	Log       io.Writer
}

// Result is what a release produced.
type Result struct {
	Images       map[string]string // image name: pushed reference by digest, or OCI layout directory
	Digests      map[string]string // image name: its index's digest, sha256:<hex>
	SBOMs        []string          // the CycloneDX SBOMs: one per image, one per plugin archive
	Chart        string            // the packaged chart
	ChartRef     string            // oci:// reference it was pushed to; empty when not pushed
	Archives     []Archive
	Checksums    string
	KrewManifest string
}

func (o *Options) complete() error {
	v, err := version.Parse(o.Version)
	if err != nil {
		return fmt.Errorf("release version: %w", err)
	}
	if v.Build != "" || strings.HasPrefix(o.Version, "v") {
		return fmt.Errorf("release version %q: want MAJOR.MINOR.PATCH[-PRERELEASE], no leading v and no +BUILD (image tags cannot hold +)", o.Version)
	}
	if o.Commit == "" || o.Created.IsZero() {
		return fmt.Errorf("release %s: the commit and its date are required", o.Version)
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if o.DownloadURL == "" {
		o.DownloadURL = o.Source + "/releases/download/v" + o.Version
	}
	if len(o.ImagePlatforms) == 0 {
		o.ImagePlatforms = DefaultImagePlatforms
	}
	if len(o.PluginPlatforms) == 0 {
		o.PluginPlatforms = DefaultPluginPlatforms
	}
	if o.Builder == nil {
		o.Builder = GoBuilder{Repo: o.Repo, Tags: o.Tags, Stamp: version.Stamp{
			Version: o.Version, GitCommit: o.Commit, BuildDate: o.Created.UTC().Format(time.RFC3339)}}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.BuildInfo == nil {
		o.BuildInfo = readBuildInfo
	}
	if o.Registry.Name != "" {
		repo, err := o.Registry.Repository(ManagerImage.Name)
		if err != nil {
			return err
		}
		// A first part without a dot, a port or "localhost" is a Docker Hub
		// path to go-containerregistry, but a host to helm.
		if host, _, _ := strings.Cut(o.Registry.Name, "/"); repo.RegistryStr() != host {
			return fmt.Errorf("registry %q: want host[:port]/path, %q is not a registry host (no dot, port or localhost)", o.Registry.Name, host)
		}
	}
	return nil
}

func (o *Options) meta() Meta {
	return Meta{Version: o.Version, Revision: o.Commit, Source: o.Source, Licenses: DefaultLicenses, Created: o.Created}
}

func (o *Options) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(o.Log, "==> "+format+"\n", args...)
}

// Run cuts the release o describes.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.complete(); err != nil {
		return Result{}, err
	}
	work, err := os.MkdirTemp("", "estuary-release-")
	if err != nil {
		return Result{}, fmt.Errorf("create build directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	if err := os.MkdirAll(o.Out, 0o750); err != nil {
		return Result{}, fmt.Errorf("create %s: %w", o.Out, err)
	}
	var r Result
	if err := o.images(ctx, work, &r); err != nil {
		return Result{}, err
	}
	if err := o.chart(ctx, &r); err != nil {
		return Result{}, err
	}
	if err := o.plugin(ctx, work, &r); err != nil {
		return Result{}, err
	}
	return r, nil
}

// builtImage is one image of a release: its image and files per platform.
type builtImage struct {
	spec  ImageSpec
	imgs  map[Platform]v1.Image
	files []Binary
}

// images builds both images for every image platform, publishes their
// indexes and writes their SBOMs.
func (o *Options) images(ctx context.Context, work string, r *Result) error {
	manager := &builtImage{spec: ManagerImage, imgs: map[Platform]v1.Image{}}
	daemon := &builtImage{spec: DaemonImage, imgs: map[Platform]v1.Image{}}
	for _, p := range o.ImagePlatforms {
		dir := filepath.Join(work, p.OS+"_"+p.Arch)
		o.logf("building estuary-manager, estuary-daemon, estuary-cni and CNI plugins %s for %s", cniplugins.Version, p)
		if err := o.platformImages(ctx, p, dir, manager, daemon); err != nil {
			return err
		}
	}
	r.Images, r.Digests = map[string]string{}, map[string]string{}
	for _, img := range []*builtImage{manager, daemon} {
		idx, err := Index(img.imgs, o.ImagePlatforms, o.meta().Labels(img.spec))
		if err != nil {
			return fmt.Errorf("index %s: %w", img.spec.Name, err)
		}
		d, err := idx.Digest()
		if err != nil {
			return fmt.Errorf("digest of %s: %w", img.spec.Name, err)
		}
		r.Digests[img.spec.Name] = d.String()
		sbom, err := o.imageSBOM(img, d.String())
		if err != nil {
			return err
		}
		r.SBOMs = append(r.SBOMs, sbom)
		if r.Images[img.spec.Name], err = o.publishIndex(ctx, img.spec.Name, idx); err != nil {
			return err
		}
	}
	return nil
}

// platformImages builds the binaries for p into dir and the two images of
// them.
func (o *Options) platformImages(ctx context.Context, p Platform, dir string, manager, daemon *builtImage) error {
	plugins := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", plugins, err)
	}
	if err := o.Builder.Commands(ctx, p, dir, ManagerCommand, DaemonCommand, CNICommand); err != nil {
		return err
	}
	if err := o.Builder.CNIPlugins(ctx, p, plugins); err != nil {
		return err
	}
	bin := func(name string) string { return filepath.Join(dir, name) }
	files := []File{{Source: bin("estuary-daemon"), Path: "/estuary-daemon"}, {Source: bin("estuary-cni"), Path: "/estuary-cni"}}
	for _, name := range pluginNames() {
		files = append(files, File{Source: filepath.Join(plugins, name), Path: "/plugins/" + name})
	}
	for _, b := range []struct {
		img   *builtImage
		files []File
	}{{manager, []File{{Source: bin("estuary-manager"), Path: "/estuary-manager"}}}, {daemon, files}} {
		img, err := Image(b.img.spec, p, b.files, o.meta())
		if err != nil {
			return err
		}
		b.img.imgs[p] = img
		for _, f := range b.files {
			b.img.files = append(b.img.files, Binary{Source: f.Source, Path: f.Path, Platform: p})
		}
	}
	return nil
}

// imageSBOM writes the SBOM of an image's index, whose digest is digest, to
// Out/sbom/<name>_<version>.cdx.json.
func (o *Options) imageSBOM(img *builtImage, digest string) (string, error) {
	repo := img.spec.Name
	if o.Registry.Name != "" {
		repo = o.Registry.Name + "/" + img.spec.Name
	}
	bom, err := SBOM(Subject{Name: img.spec.Name, Version: o.Version, Type: cdx.ComponentTypeContainer, Digest: digest,
		PURL: OCIPURL(repo, digest)}, img.files, o.BuildInfo, "v"+o.Version, o.Created)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(o.Out, "sbom")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, img.spec.Name+"_"+o.Version+SBOMSuffix)
	o.logf("writing the SBOM of %s to %s", img.spec.Name, path)
	return path, WriteSBOM(path, bom)
}

// pluginNames are the reference CNI plugins in the daemon image, sorted.
func pluginNames() []string {
	var names []string
	for n := range cniplugins.Packages() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// publishIndex pushes idx as <registry>/<name>:<version>, or writes it to
// Out/oci/<name> without a registry.
func (o *Options) publishIndex(ctx context.Context, name string, idx v1.ImageIndex) (string, error) {
	if o.Registry.Name == "" {
		dir := filepath.Join(o.Out, "oci", name)
		o.logf("writing %s:%s as an OCI layout to %s", name, o.Version, dir)
		return dir, WriteLayout(dir, o.Version, idx)
	}
	repo, err := o.Registry.Repository(name)
	if err != nil {
		return "", err
	}
	o.logf("pushing %s:%s", repo, o.Version)
	return PushIndex(ctx, repo, o.Version, idx)
}

// chart packages the chart and pushes it when there is a registry.
func (o *Options) chart(ctx context.Context, r *Result) error {
	o.logf("packaging chart %s %s", ChartName, o.Version)
	var err error
	digests := map[string]string{}
	for _, spec := range []ImageSpec{ManagerImage, DaemonImage} {
		digests[spec.Values] = r.Digests[spec.Name]
	}
	r.Chart, err = PackageChart(ctx, o.Helm, filepath.Join(o.Repo, "charts", ChartName), o.Version,
		ChartImages{Registry: o.Registry.Name, Digests: digests}, filepath.Join(o.Out, "charts"))
	if err != nil || o.Registry.Name == "" {
		return err
	}
	o.logf("pushing chart to oci://%s/charts", o.Registry.Name)
	r.ChartRef, err = PushChart(ctx, o.Helm, r.Chart, o.Registry)
	return err
}

// plugin builds kubectl-estuary for every plugin platform, archives it and
// writes the checksums and the krew manifest.
func (o *Options) plugin(ctx context.Context, work string, r *Result) error {
	out := filepath.Join(o.Out, "plugin")
	if err := os.MkdirAll(out, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	for _, p := range o.PluginPlatforms {
		o.logf("building %s for %s", PluginName, p)
		dir := filepath.Join(work, "plugin", p.OS+"_"+p.Arch)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		if err := o.Builder.Commands(ctx, p, dir, PluginCommand); err != nil {
			return err
		}
		bin := filepath.Join(dir, PluginName)
		a, err := WritePluginArchive(out, o.Version, p, bin, filepath.Join(o.Repo, "LICENSE"), o.Created)
		if err != nil {
			return err
		}
		bom, err := SBOM(Subject{Name: filepath.Base(a.Path), Version: o.Version, Type: cdx.ComponentTypeFile, Digest: "sha256:" + a.SHA256},
			[]Binary{{Source: bin, Path: PluginName, Platform: p}}, o.BuildInfo, "v"+o.Version, o.Created)
		if err != nil {
			return err
		}
		a.SBOM = a.Path + SBOMSuffix
		if err := WriteSBOM(a.SBOM, bom); err != nil {
			return err
		}
		r.Archives, r.SBOMs = append(r.Archives, a), append(r.SBOMs, a.SBOM)
	}
	r.Checksums = filepath.Join(out, "sha256sums.txt")
	if err := WriteChecksums(r.Checksums, r.Archives); err != nil {
		return err
	}
	r.KrewManifest = filepath.Join(o.Out, "plugins", KrewName+".yaml")
	return WriteKrewManifest(r.KrewManifest, KrewManifest(o.Version, o.Source, o.DownloadURL, r.Archives))
}
