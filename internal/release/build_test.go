package release

import (
	"context"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/cniplugins"
	"github.com/estuary-cni/estuary/internal/version"
)

// TestGoBuilderStampsAndCrossCompiles builds a small command of the module
// for this machine and for another architecture: the first reports the
// stamped version, the second is an ELF binary for its architecture.
func TestGoBuilderStampsAndCrossCompiles(t *testing.T) {
	b := GoBuilder{Repo: "testdata", Stamp: version.Stamp{Version: "0.2.0-rc.1", GitCommit: "abc123", BuildDate: "2026-01-02T03:04:05Z"}}
	cmd := Command{Path: "./cmd/stamped", Tags: []string{"grpcnotrace"}}
	ctx := context.Background()

	native := t.TempDir()
	if err := b.Commands(ctx, Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}, native, cmd); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(native, "stamped")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "stamped 0.2.0-rc.1 (commit abc123, built 2026-01-02T03:04:05Z, "; !strings.HasPrefix(string(out), want) {
		t.Errorf("stamped printed %q, want %q...", out, want)
	}

	other, machine := Platform{OS: "linux", Arch: "arm64"}, elf.EM_AARCH64
	if runtime.GOARCH == "arm64" {
		other, machine = Platform{OS: "linux", Arch: "amd64"}, elf.EM_X86_64
	}
	cross := t.TempDir()
	if err := b.Commands(ctx, other, cross, cmd); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(filepath.Join(cross, "stamped"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if f.Machine != machine {
		t.Errorf("%s build is for %s, want %s", other, f.Machine, machine)
	}
}

func TestParsePlatform(t *testing.T) {
	if p, err := ParsePlatform("darwin/arm64"); err != nil || p != (Platform{"darwin", "arm64"}) {
		t.Errorf("ParsePlatform(darwin/arm64) = %v, %v", p, err)
	}
	for _, bad := range []string{"linux", "linux/", "/amd64", "linux/arm/v7"} {
		if _, err := ParsePlatform(bad); err == nil {
			t.Errorf("ParsePlatform(%q) accepted", bad)
		}
	}
}

func TestPlainHTTP(t *testing.T) {
	for reg, want := range map[string]bool{
		"127.0.0.1:5000/estuary": true, "localhost:5000": true, "[::1]:5000/x": true,
		"registry.example/estuary": false, "10.0.0.1:5000": false,
	} {
		if got, err := (Registry{Name: reg}).PlainHTTP(); err != nil || got != want {
			t.Errorf("PlainHTTP(%s) = %v, %v; want %v", reg, got, err, want)
		}
	}
	if got, _ := (Registry{Name: "registry.example", Insecure: true}).PlainHTTP(); !got {
		t.Error("an insecure registry is not plain HTTP")
	}
}

// TestGoBuilderCNIPlugins builds the daemon image's reference plugins for
// this machine: each reports the pinned version.
func TestGoBuilderCNIPlugins(t *testing.T) {
	dir := t.TempDir()
	p := Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	if err := (GoBuilder{}).CNIPlugins(context.Background(), p, dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range pluginNames() {
		// Without CNI_COMMAND a reference plugin prints its about line.
		out, _ := exec.Command(filepath.Join(dir, name)).CombinedOutput()
		if want := "CNI " + name + " plugin " + cniplugins.Version; !strings.Contains(string(out), want) {
			t.Errorf("%s printed %q, want %q", name, out, want)
		}
	}
}
