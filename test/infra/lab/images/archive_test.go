package images

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestArchiveReadsBackUnderEveryTag writes an image with two tags and reads
// the archive back with go-containerregistry under each: the run
// configuration, and the layer's files, directories and links with their
// modes and contents.
func TestArchiveReadsBackUnderEveryTag(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	if err := os.WriteFile(bin, []byte("#!prog"), 0o700); err != nil {
		t.Fatal(err)
	}
	img := Image{Tag: "example.local/prog:lab", Tags: []string{"registry.example/team/prog:1.2.3"},
		Binary: bin, Path: "/usr/local/bin/prog",
		Files: []File{
			{Path: "/etc/prog.conf", Data: []byte("key: value\n"), Mode: 0o644},
			{Path: "/usr/bin/prog", Link: "../local/bin/prog"},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		},
		Cmd: []string{"serve", "--port=80"}, Env: []string{"PATH=/usr/local/bin", "MODE=lab"}}
	out := filepath.Join(dir, "prog.tar")
	if err := WriteArchive(img, out); err != nil {
		t.Fatal(err)
	}
	for _, ref := range append([]string{img.Tag}, img.Tags...) {
		v := readTagged(t, out, ref)
		cfg, err := v.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/prog"}) || !slices.Equal(c.Cmd, img.Cmd) ||
			!slices.Equal(c.Env, img.Env) || cfg.OS != "linux" {
			t.Errorf("%s: os %s, config %+v; want entrypoint /usr/local/bin/prog, cmd %v, env %v",
				ref, cfg.OS, c, img.Cmd, img.Env)
		}
		layer := layerEntries(t, v)
		want := map[string]struct {
			typ  byte
			mode int64
			body string
		}{
			"usr/":               {tar.TypeDir, 0o755, ""},
			"usr/local/":         {tar.TypeDir, 0o755, ""},
			"usr/local/bin/":     {tar.TypeDir, 0o755, ""},
			"usr/local/bin/prog": {tar.TypeReg, 0o755, "#!prog"},
			"etc/prog.conf":      {tar.TypeReg, 0o644, "key: value\n"},
			"usr/bin/prog":       {tar.TypeSymlink, 0o777, ""},
			"tmp/":               {tar.TypeDir, 0o1777, ""},
		}
		for n, w := range want {
			e, ok := layer[n]
			if !ok {
				t.Errorf("%s: layer has no %s (has %v)", ref, n, keys(layer))
				continue
			}
			if e.hdr.Typeflag != w.typ || e.hdr.Mode != w.mode || e.body != w.body {
				t.Errorf("%s: %s is type %c mode %o %q; want type %c mode %o %q",
					ref, n, e.hdr.Typeflag, e.hdr.Mode, e.body, w.typ, w.mode, w.body)
			}
		}
		if l := layer["usr/bin/prog"].hdr; l != nil && l.Linkname != "../local/bin/prog" {
			t.Errorf("%s: usr/bin/prog links to %q", ref, l.Linkname)
		}
	}
}

// TestArchiveWithNoEntrypoint: an empty Entrypoint leaves the image without
// one, and the environment defaults to PATH=/.
func TestArchiveWithNoEntrypoint(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "data.tar")
	img := Image{Tag: "example.local/data:v1", Files: []File{{Path: "/data", Data: []byte("x")}},
		Entrypoint: []string{}, Cmd: []string{"/bin/sh"}}
	if err := WriteArchive(img, out); err != nil {
		t.Fatal(err)
	}
	cfg, err := readTagged(t, out, img.Tag).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 0 || !slices.Equal(cfg.Config.Env, []string{"PATH=/"}) {
		t.Errorf("config %+v; want no entrypoint and PATH=/", cfg.Config)
	}
}

// readTagged opens the image tagged ref in the docker-archive at archive.
func readTagged(t *testing.T, archive, ref string) v1.Image {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatalf("read %s from %s: %v", ref, archive, err)
	}
	return v
}

type layerEntry struct {
	hdr  *tar.Header
	body string
}

// layerEntries returns the entries of v's single layer by name.
func layerEntries(t *testing.T, v v1.Image) map[string]layerEntry {
	t.Helper()
	layers, err := v.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d: %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	out := map[string]layerEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = layerEntry{hdr: h, body: string(body)}
	}
}

// BenchmarkWriteArchive writes an image of one real program (this test
// binary) as a docker-archive; b.SetBytes makes the result a rate over the
// program's size.
func BenchmarkWriteArchive(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "bench.tar")
	img := Image{Tag: "example.local/bench:v1", Binary: exe, Path: "/bench"}
	b.SetBytes(st.Size())
	for b.Loop() {
		if err := WriteArchive(img, out); err != nil {
			b.Fatal(err)
		}
	}
}
