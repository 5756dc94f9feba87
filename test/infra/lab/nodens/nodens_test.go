package nodens

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMkdirAllTrackAndRemoveEmpty(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "a", "b", "c")
	made, err := mkdirAllTrack(target)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(base, "a"), filepath.Join(base, "a", "b"), target}
	if strings.Join(made, ",") != strings.Join(want, ",") {
		t.Fatalf("created %v, want %v", made, want)
	}
	if again, _ := mkdirAllTrack(target); len(again) != 0 {
		t.Errorf("second call created %v", again)
	}
	if err := os.WriteFile(filepath.Join(base, "a", "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removed := RemoveEmpty(made)
	if len(removed) != 2 {
		t.Errorf("removed %v; want only the two empty directories", removed)
	}
	if _, err := os.Stat(filepath.Join(base, "a")); err != nil {
		t.Errorf("non-empty directory removed: %v", err)
	}
}

func TestMountsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Mounts {
		if seen[m.Target] || seen[m.Source] {
			t.Errorf("duplicate mount %v", m)
		}
		seen[m.Target], seen[m.Source] = true, true
		if !filepath.IsAbs(m.Target) || strings.Contains(m.Source, "/") {
			t.Errorf("bad mount %v", m)
		}
	}
}
