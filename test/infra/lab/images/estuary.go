package images

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/estuary-cni/estuary/internal/cniplugins"
	"github.com/estuary-cni/estuary/internal/version"
)

// Repositories of estuary's own images.
const (
	ManagerRepo = "estuary.local/estuary-manager"
	DaemonRepo  = "estuary.local/estuary-daemon"
)

// Estuary is the pair of images an estuary install runs.
type Estuary struct {
	Manager Built `json:"manager"` // /estuary-manager
	Daemon  Built `json:"daemon"`  // /estuary-daemon, /estuary-cni, /plugins/<each of cniplugins.Packages>
}

// BuildEstuary builds static binaries of estuary-manager, estuary-daemon and
// estuary-cni from the checkout at repo (the Go build cache makes an unchanged
// tree cheap), installs the reference plugins once per version into cacheDir,
// and returns the two images, tagged and cached in cacheDir by content. The
// binaries carry the version this program was built with (internal/version).
func BuildEstuary(repo, cacheDir string) (Estuary, error) {
	if err := os.MkdirAll(cacheDir, 0o750); err != nil {
		return Estuary{}, fmt.Errorf("create %s: %w", cacheDir, err)
	}
	plugins, err := BuildCNIPlugins(cacheDir)
	if err != nil {
		return Estuary{}, err
	}
	work, err := os.MkdirTemp(cacheDir, ".estuary-build-")
	if err != nil {
		return Estuary{}, fmt.Errorf("create build dir in %s: %w", cacheDir, err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	out := work + string(filepath.Separator)
	ldflags := "-ldflags=" + strings.Join(append([]string{"-s", "-w"}, version.Current().LDFlags()...), " ")
	args := []string{"build", "-trimpath", "-buildvcs=false", ldflags, "-o", out,
		"./cmd/estuary-manager", "./cmd/estuary-daemon"}
	if err := goCommand(repo, nil, args...); err != nil {
		return Estuary{}, fmt.Errorf("build estuary binaries in %s: %w", repo, err)
	}
	// estuary-cni starts once per CNI call: it is also built without gRPC's
	// request tracing (as the Makefile's build target does).
	args = []string{"build", "-trimpath", "-buildvcs=false", "-tags", "grpcnotrace", ldflags, "-o", out,
		"./cmd/estuary-cni"}
	if err := goCommand(repo, nil, args...); err != nil {
		return Estuary{}, fmt.Errorf("build estuary-cni in %s: %w", repo, err)
	}
	bin := func(name string) string { return filepath.Join(work, name) }
	var e Estuary
	if e.Manager, err = CachedImage(cacheDir, ManagerRepo,
		[]File{{Source: bin("estuary-manager"), Path: "/estuary-manager"}}, nil); err != nil {
		return Estuary{}, err
	}
	daemonFiles := []File{
		{Source: bin("estuary-daemon"), Path: "/estuary-daemon"},
		{Source: bin("estuary-cni"), Path: "/estuary-cni"},
	}
	for _, name := range slices.Sorted(maps.Keys(cniplugins.Packages())) {
		daemonFiles = append(daemonFiles, File{Source: filepath.Join(plugins, name), Path: "/plugins/" + name})
	}
	if e.Daemon, err = CachedImage(cacheDir, DaemonRepo, daemonFiles, nil); err != nil {
		return Estuary{}, err
	}
	return e, nil
}

// BuildCNIPlugins installs the reference plugins the daemon image carries,
// static builds at cniplugins.Version, into cacheDir/cni-plugins-<version>
// unless they are there, and returns that directory.
func BuildCNIPlugins(cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, "cni-plugins-"+cniplugins.Version)
	complete := true
	for name := range cniplugins.Packages() {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			complete = false
		}
	}
	if complete {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(cacheDir, ".cni-plugins-")
	if err != nil {
		return "", fmt.Errorf("create plugin build dir in %s: %w", cacheDir, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	args := append([]string{"install", "-trimpath", "-ldflags=-s -w"}, cniplugins.InstallArgs()...)
	if err := goCommand(tmp, []string{"GOBIN=" + tmp}, args...); err != nil {
		return "", fmt.Errorf("install CNI plugins %s: %w", cniplugins.Version, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("remove %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	for name := range cniplugins.Packages() {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("move plugin %s into %s: %w", name, dir, err)
		}
	}
	return dir, nil
}

// goCommand runs the go tool in dir, linking statically, with extraEnv added to
// the environment.
func goCommand(dir string, extraEnv []string, args ...string) error {
	cmd := exec.Command("go", args...) //nolint:gosec // G204: runs the go tool on arguments the lab built
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local"), extraEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 30))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
