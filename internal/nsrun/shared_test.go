package nsrun_test

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// mountOf is the optional fields of dir's topmost mount in this process's
// mountinfo ("shared:N" and the like), and how many mounts dir has.
func mountOf(t *testing.T, dir string) (string, int) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var opt string
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 6 && fields[4] == dir {
			sep := slices.Index(fields, "-")
			if sep < 6 {
				sep = len(fields)
			}
			opt, n = strings.Join(fields[6:sep], " "), n+1
		}
	}
	return opt, n
}

// TestSharedDirMakesASharedMountPoint: a plain directory becomes a mount
// point with shared propagation, and a second call keeps it as it is (no
// second mount on top).
func TestSharedDirMakesASharedMountPoint(t *testing.T) {
	nstest.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "netns")
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if _, n := mountOf(t, dir); n != 0 {
		t.Fatalf("%s is a mount point before SharedDir", dir)
	}
	for i := range 2 {
		if err := nsrun.SharedDir(dir); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		opt, n := mountOf(t, dir)
		if n != 1 || !strings.Contains(opt, "shared:") {
			t.Fatalf("call %d: %s has %d mounts, propagation %q; want one shared mount point", i+1, dir, n, opt)
		}
	}
}
