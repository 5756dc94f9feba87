package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := CachedFull(dir, "prog", Image{Tag: "example.local/prog:v1", Binary: bin, Path: "/prog"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || manifest[0].RepoTags[0] != "example.local/prog:v1" || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest: %s", files["manifest.json"])
	}
	if _, ok := files[manifest[0].Config]; !ok {
		t.Errorf("config %s missing", manifest[0].Config)
	}
	if _, ok := files[manifest[0].Layers[0]]; !ok {
		t.Errorf("layer %s missing", manifest[0].Layers[0])
	}
	again, err := CachedFull(dir, "prog", Image{Tag: "example.local/prog:v1", Binary: bin, Path: "/prog"})
	if err != nil || again != out {
		t.Errorf("second CachedFull = %s, %v; want cached %s", again, err, out)
	}
}

// readArchive returns the files of a docker-archive and of its single layer.
func readArchive(t *testing.T, archive string) (files, layer map[string]*tar.Header, manifest []byte) {
	t.Helper()
	data := map[string][]byte{}
	files = map[string]*tar.Header{}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
		data[h.Name], _ = io.ReadAll(tr)
	}
	var m []struct{ Layers []string }
	if err := json.Unmarshal(data["manifest.json"], &m); err != nil || len(m) != 1 || len(m[0].Layers) != 1 {
		t.Fatalf("manifest %s: %v", data["manifest.json"], err)
	}
	layer = map[string]*tar.Header{}
	zr, err := gzip.NewReader(bytes.NewReader(data[m[0].Layers[0]]))
	if err != nil {
		t.Fatalf("layer %s: %v", m[0].Layers[0], err)
	}
	lr := tar.NewReader(zr)
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		layer[h.Name] = h
	}
	return files, layer, data["manifest.json"]
}

func TestCachedImageFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := []File{
		{Source: write("daemon", "daemon v1"), Path: "/estuary-daemon"},
		{Source: write("loopback", "loopback"), Path: "/plugins/loopback"},
		{Source: write("portmap", "portmap"), Path: "/plugins/portmap"},
	}
	cache := filepath.Join(dir, "cache")
	b, err := CachedImage(cache, "example.local/daemon", files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Repository() != "example.local/daemon" || len(b.Version()) != 12 {
		t.Errorf("tag %q: repository %q version %q", b.Tag, b.Repository(), b.Version())
	}
	_, layer, manifest := readArchive(t, b.Archive)
	for _, name := range []string{"estuary-daemon", "plugins/", "plugins/loopback", "plugins/portmap"} {
		if layer[name] == nil {
			t.Errorf("layer has no %s (has %v)", name, keys(layer))
		}
	}
	if h := layer["plugins/portmap"]; h != nil && h.Mode != 0o755 {
		t.Errorf("plugins/portmap mode %o, want 755", h.Mode)
	}
	if !bytes.Contains(manifest, []byte(b.Tag)) {
		t.Errorf("manifest %s does not carry %s", manifest, b.Tag)
	}
	again, err := CachedImage(cache, "example.local/daemon", files, nil)
	if err != nil || again != b {
		t.Errorf("unchanged files: %+v, %v; want %+v", again, err, b)
	}
	write("daemon", "daemon v2")
	changed, err := CachedImage(cache, "example.local/daemon", files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Tag == b.Tag || changed.Archive == b.Archive {
		t.Errorf("changed binary kept tag %s", changed.Tag)
	}
	if _, err := CachedImage(cache, "example.local/daemon", []File{{Source: files[0].Source, Path: "relative"}}, nil); err == nil {
		t.Error("relative path in image accepted")
	}
}

func TestPruneArchives(t *testing.T) {
	dir := t.TempDir()
	var made []string
	for i := range keepArchives + 2 {
		p := filepath.Join(dir, fmt.Sprintf("daemon-%012d.tar", i))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		mt := time.Unix(int64(1000+i), 0)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	other := filepath.Join(dir, "manager-000000000000.tar")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pruneArchives(dir, "daemon", made[0])
	for i, p := range made {
		_, err := os.Stat(p)
		want := i == 0 || i >= 2 // the kept one and the newest keepArchives
		if (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another repository's archive was removed: %v", err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
