package release

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI annotation keys (github.com/opencontainers/image-spec annotations.md),
// set as labels on every image config and as annotations on each index.
const (
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelSource      = "org.opencontainers.image.source"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelCreated     = "org.opencontainers.image.created"
	// LabelRefName names an image in an OCI layout.
	LabelRefName = "org.opencontainers.image.ref.name"
)

// File is one file of an image: a copy of a file of this machine.
type File struct {
	Source string // path on this machine
	Path   string // absolute path in the image
}

// ImageSpec describes one image of estuary, the same for every platform but
// for its files.
type ImageSpec struct {
	Name        string   // repository name below the registry, e.g. estuary-daemon
	Description string   // org.opencontainers.image.description
	Entrypoint  []string // the container's command
	User        string   // the user it runs as; empty: root
	Values      string   // the chart's values key of the component, e.g. daemon (daemon.image)
}

// Meta is what every image of a release is labelled with.
type Meta struct {
	Version  string
	Revision string    // the commit
	Source   string    // the repository's URL
	Licenses string    // an SPDX expression
	Created  time.Time // the commit's date, so a rebuild gives the same digests
}

// Labels returns the OCI labels of an image of spec.
func (m Meta) Labels(spec ImageSpec) map[string]string {
	return map[string]string{
		LabelTitle:       spec.Name,
		LabelDescription: spec.Description,
		LabelVersion:     m.Version,
		LabelRevision:    m.Revision,
		LabelSource:      m.Source,
		LabelLicenses:    m.Licenses,
		LabelCreated:     m.Created.UTC().Format(time.RFC3339),
	}
}

// Image builds the OCI image of spec for p: one layer holding files, with the
// OCI labels of meta.
func Image(spec ImageSpec, p Platform, files []File, meta Meta) (v1.Image, error) {
	layer, err := layerOf(files)
	if err != nil {
		return nil, fmt.Errorf("image %s for %s: %w", spec.Name, p, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("image %s for %s: %w", spec.Name, p, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s config: %w", spec.Name, err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = p.OS, p.Arch
	cfg.Created = v1.Time{Time: meta.Created.UTC()}
	cfg.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		Env:        []string{"PATH=/"},
		User:       spec.User,
		Labels:     meta.Labels(spec),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("image %s for %s: %w", spec.Name, p, err)
	}
	return img, nil
}

// Index gathers one image per platform into an OCI image index annotated
// with labels.
func Index(imgs map[Platform]v1.Image, order []Platform, labels map[string]string) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(order))
	for _, p := range order {
		img, ok := imgs[p]
		if !ok {
			return nil, fmt.Errorf("no image for %s", p)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: p.OS, Architecture: p.Arch},
		}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	annotated, ok := mutate.Annotations(idx, labels).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotate index: not an index")
	}
	return annotated, nil
}

// layerOf packs files, with the directories above them, into a gzipped OCI
// layer. Entries have mode 0755 and time zero, so the same files give the
// same digest.
func layerOf(files []File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		if !path.IsAbs(f.Path) || name == "" {
			return nil, fmt.Errorf("path %q in image: want an absolute file path", f.Path)
		}
		if err := addParents(tw, dirs, name); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(filepath.Clean(f.Source))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.Source, err)
		}
		hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if err := writeEntry(tw, hdr, data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}

// addParents writes the directories above name that are not written yet.
func addParents(tw *tar.Writer, dirs map[string]bool, name string) error {
	var parents []string
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		parents = append([]string{d}, parents...)
	}
	for _, d := range parents {
		if dirs[d] {
			continue
		}
		dirs[d] = true
		if err := writeEntry(tw, &tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}, nil); err != nil {
			return err
		}
	}
	return nil
}

func writeEntry(tw *tar.Writer, hdr *tar.Header, data []byte) error {
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header %s: %w", hdr.Name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("tar write %s: %w", hdr.Name, err)
	}
	return nil
}
