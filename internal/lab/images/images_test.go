package images

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := Cached(dir, "example.local/prog:v1", bin, "/prog")
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
	again, err := Cached(dir, "example.local/prog:v1", bin, "/prog")
	if err != nil || again != out {
		t.Errorf("second Cached = %s, %v; want cached %s", again, err, out)
	}
}
