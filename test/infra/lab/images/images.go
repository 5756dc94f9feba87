// Package images owns the lab's container images: it packs static binaries into a
// single-layer docker-archive tarball (the format `ctr images import` reads), builds
// the pause program and estuary's own binaries from source, and caches both by
// content hash so nothing is ever pulled from a registry.
package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/estuary-cni/estuary/internal/release"
)

// File is one entry of an image's layer: a copy of a file of this machine (the
// default), inline content, a symbolic link or a directory.
type File struct {
	Source string // path of the file on this machine (links followed)
	Path   string // absolute path inside the image, e.g. /plugins/portmap
	Data   []byte // content of a file that has no Source
	Link   string // when set, Path is a symbolic link to Link
	Dir    bool   // when set, Path is a directory
	Mode   int64  // permission bits; 0755 when zero
}

// kind names what f is, for hashing and error messages.
func (f File) kind() string {
	switch {
	case f.Dir:
		return "dir"
	case f.Link != "":
		return "link:" + f.Link
	case f.Source == "":
		return "data"
	}
	return "file"
}

func (f File) mode() int64 {
	if f.Mode == 0 {
		return 0o755
	}
	return f.Mode
}

// Image describes an image: Binary at Path (the single-binary form), then Files.
type Image struct {
	Tag        string   // e.g. estuary-lab.local/pause:<hash>
	Tags       []string // further names of the same image
	Binary     string   // path of the static binary on this machine
	Path       string   // path of the binary inside the image, e.g. /pause
	Files      []File   // further files
	Entrypoint []string // nil: the path of the first file; empty: none
	Cmd        []string // the default arguments
	Env        []string // defaults to PATH=/
}

// files returns every file of img, Binary first.
func (img Image) files() []File {
	var fs []File
	if img.Binary != "" {
		fs = append(fs, File{Source: img.Binary, Path: img.Path})
	}
	return append(fs, img.Files...)
}

// WriteArchive writes img as a docker-archive tarball to out (atomically), named
// by Tag and every one of Tags.
func WriteArchive(img Image, out string) error {
	v, err := img.Build()
	if err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range append([]string{img.Tag}, img.Tags...) {
		tag, err := name.NewTag(t)
		if err != nil {
			return fmt.Errorf("image %s: tag %q: %w", img.Tag, t, err)
		}
		refs[tag] = v
	}
	if err := writeTarball(out, refs); err != nil {
		return fmt.Errorf("image %s: %w", img.Tag, err)
	}
	return nil
}

// writeTarball writes the docker-archive of refs to out by way of a temporary
// file, so that out is either whole or absent.
func writeTarball(out string, refs map[name.Reference]v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(out), err)
	}
	tmp := out + ".tmp"
	f, err := os.OpenFile(filepath.Clean(tmp), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	err = tarball.MultiRefWrite(refs, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}

// Build returns img as an image of one layer holding its files, run with its
// entrypoint (the path of the first file when nil), command and environment
// (PATH=/ when empty).
func (img Image) Build() (v1.Image, error) {
	files := img.files()
	if len(files) == 0 {
		return nil, fmt.Errorf("image %s: no files", img.Tag)
	}
	data, err := layerTar(files)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Tag, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", img.Tag, err)
	}
	v, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Tag, err)
	}
	ep := img.Entrypoint
	if ep == nil {
		ep = []string{files[0].Path}
	}
	env := img.Env
	if len(env) == 0 {
		env = []string{"PATH=/"}
	}
	cfg, err := v.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s config: %w", img.Tag, err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config = v1.Config{Entrypoint: ep, Cmd: img.Cmd, Env: env}
	if v, err = mutate.ConfigFile(v, cfg); err != nil {
		return nil, fmt.Errorf("image %s config: %w", img.Tag, err)
	}
	return v, nil
}

// layerTar packs files, with the directories above them, into one layer.
func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		name, err := layerName(f.Path)
		if err != nil {
			return nil, err
		}
		for _, d := range parents(name) {
			if err := addDir(tw, dirs, d, 0o755); err != nil {
				return nil, err
			}
		}
		if err := addEntry(tw, dirs, name, f); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// addEntry writes f as name: a directory, a link, inline data or a copied file.
func addEntry(tw *tar.Writer, dirs map[string]bool, name string, f File) error {
	switch {
	case f.Dir:
		return addDir(tw, dirs, name, f.mode())
	case f.Link != "":
		hdr := &tar.Header{Name: name, Linkname: f.Link, Mode: 0o777, Typeflag: tar.TypeSymlink, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("tar header %s: %w", name, err)
		}
		return nil
	case f.Source == "":
		return addFile(tw, name, f.Data, f.mode())
	}
	data, err := os.ReadFile(filepath.Clean(f.Source))
	if err != nil {
		return fmt.Errorf("read %s: %w", f.Source, err)
	}
	return addFile(tw, name, data, f.mode())
}

// addDir writes directory d once.
func addDir(tw *tar.Writer, dirs map[string]bool, d string, mode int64) error {
	if dirs[d] {
		return nil
	}
	dirs[d] = true
	hdr := &tar.Header{Name: d + "/", Mode: mode, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header %s: %w", d, err)
	}
	return nil
}

// layerName turns an absolute path inside the image into a tar entry name.
func layerName(p string) (string, error) {
	clean := path.Clean(p)
	if !path.IsAbs(p) || clean == "/" {
		return "", fmt.Errorf("path %q in image: want an absolute file path", p)
	}
	return strings.TrimPrefix(clean, "/"), nil
}

// parents lists the directories above name, outermost first.
func parents(name string) []string {
	var out []string
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

func addFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("tar write %s: %w", name, err)
	}
	return nil
}

// FileHash returns the first 12 hex digits of the SHA-256 of the file at path.
func FileHash(path string) (string, error) {
	h, err := release.FileSHA256(path)
	if err != nil {
		return "", err
	}
	return h[:12], nil
}

// BuildPause compiles the pause program in srcDir (a directory of the estuary module)
// into cacheDir, keyed by the hash of its source, and returns the binary's path.
func BuildPause(srcDir, cacheDir string) (string, error) {
	h, err := FileHash(filepath.Join(srcDir, "main.go"))
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cacheDir, "pause-"+h)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cacheDir, 0o750); err != nil {
		return "", fmt.Errorf("create %s: %w", cacheDir, err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin+".tmp", ".") //nolint:gosec // G204: runs programs the lab located itself
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build pause in %s: %w\n%s", srcDir, err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", fmt.Errorf("rename pause binary: %w", err)
	}
	return bin, nil
}
