package lab

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestFlannelVersionFromTheModule(t *testing.T) {
	v, err := flannelVersion(filepath.Join("..", "..", "..", "hack", "flanneld", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "v0.") {
		t.Errorf("flannel version %q, want a v0.x module version", v)
	}
	dir := t.TempDir()
	one := filepath.Join(dir, "go.mod")
	if err := writeFile(one, "module x\n\nrequire github.com/flannel-io/flannel v0.27.0\n"); err != nil {
		t.Fatal(err)
	}
	if v, err := flannelVersion(one); err != nil || v != "v0.27.0" {
		t.Errorf("single-line require: %q, %v", v, err)
	}
	none := filepath.Join(dir, "none.mod")
	if err := writeFile(none, "module x\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := flannelVersion(none); err == nil {
		t.Error("a module without flannel: want an error")
	}
}
