package sysctl

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSetRootReadsAndWritesThere: after SetRoot, Read and Write use the
// directory given as /proc/sys (the daemon's writable mount of the host's);
// SetRoot("") goes back to /proc/sys.
func TestSetRootReadsAndWritesThere(t *testing.T) {
	dir := t.TempDir()
	key := "net/ipv4/ip_forward"
	if err := os.MkdirAll(filepath.Join(dir, "net/ipv4"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, key), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	SetRoot(dir)
	t.Cleanup(func() { SetRoot("") })
	if err := Write("", []Setting{{Key: key, Value: "1"}}); err != nil {
		t.Fatalf("Write under %s: %v", dir, err)
	}
	if v, err := Read("", key); err != nil || v != "1" {
		t.Fatalf("Read under %s = %q, %v; want 1", dir, v, err)
	}
	SetRoot("")
	if Root() != DefaultRoot {
		t.Fatalf("Root after SetRoot(\"\") = %s, want %s", Root(), DefaultRoot)
	}
}
