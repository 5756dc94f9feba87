package lab

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAppendCoreDNS(t *testing.T) {
	bin, cache := t.TempDir(), t.TempDir()
	if err := writeFile(filepath.Join(bin, "coredns"), "#!coredns"); err != nil {
		t.Fatal(err)
	}
	got, err := appendCoreDNS([]string{"pause.tar"}, cache, bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "pause.tar" {
		t.Fatalf("archives %v, want pause.tar then the coredns archive", got)
	}
	tags, files := readArchive(t, got[1])
	if !slices.Equal(tags, []string{CoreDNSImage}) || !slices.Contains(files, "coredns") {
		t.Errorf("archive %s: tags %v, layer files %v; want %s with /coredns", got[1], tags, files, CoreDNSImage)
	}
}

func TestAppendCoreDNSNamesMissingBinary(t *testing.T) {
	_, err := appendCoreDNS(nil, t.TempDir(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "kube-binaries.sh coredns") {
		t.Errorf("error %v, want one that says how to build coredns", err)
	}
}

// readArchive returns the tags of a docker-archive and the files of its layers.
func readArchive(t *testing.T, path string) (tags, files []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tags, files
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case hdr.Name == "manifest.json":
			var m []struct{ RepoTags []string }
			if err := json.NewDecoder(tr).Decode(&m); err != nil || len(m) != 1 {
				t.Fatalf("manifest of %s: %v %+v", path, err, m)
			}
			tags = m[0].RepoTags
		case strings.HasSuffix(hdr.Name, ".tar.gz"):
			zr, err := gzip.NewReader(tr)
			if err != nil {
				t.Fatalf("layer %s of %s: %v", hdr.Name, path, err)
			}
			lr := tar.NewReader(zr)
			for h, err := lr.Next(); err == nil; h, err = lr.Next() {
				files = append(files, h.Name)
			}
		}
	}
}
