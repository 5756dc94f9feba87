package nsrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

func TestDoRunsInTheNamespaceAndLeavesTheCallerAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	name := "estnsrun-" + strings.ReplaceAll(filepath.Base(t.TempDir()), "_", "")
	if len(name) > 30 {
		name = name[:30]
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	path := filepath.Join("/var/run/netns", name)
	want, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = want.Close() }()
	before, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = before.Close() }()

	var inside bool
	if err := Do(path, func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer func() { _ = cur.Close() }()
		inside = cur.Equal(want)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !inside {
		t.Error("fn did not run in the target namespace")
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = after.Close() }()
	if !after.Equal(before) {
		t.Error("the caller's thread changed namespace")
	}
}

func TestDoNamesAMissingNamespace(t *testing.T) {
	err := Do("/nonexistent/netns", func() error { return nil })
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/netns") {
		t.Fatalf("got %v; want an error naming the path", err)
	}
}

func TestDoWithoutPathRunsHere(t *testing.T) {
	ran := false
	if err := Do("", func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("ran=%v err=%v", ran, err)
	}
}
