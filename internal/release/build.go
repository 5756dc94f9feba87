package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/estuary-cni/estuary/internal/cniplugins"
	"github.com/estuary-cni/estuary/internal/version"
)

// Platform is an operating system and CPU architecture, as GOOS and GOARCH.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatform parses "os/arch".
func ParsePlatform(s string) (Platform, error) {
	osName, arch, ok := strings.Cut(s, "/")
	if !ok || osName == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/arch, e.g. linux/arm64", s)
	}
	return Platform{OS: osName, Arch: arch}, nil
}

// Command is a main package of the checkout, built into a binary of its
// directory's name.
type Command struct {
	Path string   // package path relative to the checkout, e.g. ./cmd/estuary-cni
	Tags []string // build tags
}

// Name is the binary's name: the package directory's.
func (c Command) Name() string { return filepath.Base(c.Path) }

// The commands a release ships. estuary-cni runs once per CNI call, so it is
// built without gRPC's request tracing, as the Makefile builds it.
var (
	ManagerCommand = Command{Path: "./cmd/estuary-manager"}
	DaemonCommand  = Command{Path: "./cmd/estuary-daemon"}
	CNICommand     = Command{Path: "./cmd/estuary-cni", Tags: []string{"grpcnotrace"}}
	PluginCommand  = Command{Path: "./cmd/kubectl-estuary"}
)

// Builder makes the binaries of a release.
type Builder interface {
	// Commands builds each command for p into dir, as dir/<name>.
	Commands(ctx context.Context, p Platform, dir string, cmds ...Command) error
	// CNIPlugins builds the reference CNI plugins the daemon image carries
	// (cniplugins.Packages) for p into dir, as dir/<name>.
	CNIPlugins(ctx context.Context, p Platform, dir string) error
}

// GoBuilder builds with the go tool: static (CGO_ENABLED=0), -trimpath,
// without symbol tables, stamped with Stamp.
type GoBuilder struct {
	Repo  string        // the checkout
	Stamp version.Stamp // the version linked into estuary's binaries
	Tags  []string      // build tags added to every command's
}

// Commands builds cmds for p into dir, one go build per set of tags.
func (b GoBuilder) Commands(ctx context.Context, p Platform, dir string, cmds ...Command) error {
	byTags := map[string][]string{}
	for _, c := range cmds {
		tags := strings.Join(append(slices.Clone(c.Tags), b.Tags...), ",")
		byTags[tags] = append(byTags[tags], c.Path)
	}
	keys := make([]string, 0, len(byTags))
	for k := range byTags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ldflags := "-ldflags=" + strings.Join(append([]string{"-s", "-w"}, b.Stamp.LDFlags()...), " ")
	for _, tags := range keys {
		args := []string{"build", "-trimpath", "-buildvcs=false", ldflags, "-o", dir + string(filepath.Separator)}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		if err := goTool(ctx, b.Repo, p, nil, append(args, byTags[tags]...)...); err != nil {
			return fmt.Errorf("build %s for %s: %w", strings.Join(byTags[tags], " "), p, err)
		}
	}
	return nil
}

// CNIPlugins installs the reference plugins at cniplugins.Version for
// p, stamped with that version, with `go install module@version` into a
// scratch GOPATH (go install puts
// binaries of another platform in GOPATH/bin/<os>_<arch>), sharing this
// machine's module cache, and moves them into dir.
func (b GoBuilder) CNIPlugins(ctx context.Context, p Platform, dir string) error {
	gopath, err := os.MkdirTemp("", "estuary-release-gopath-")
	if err != nil {
		return fmt.Errorf("create scratch GOPATH: %w", err)
	}
	defer func() { _ = os.RemoveAll(gopath) }()
	modCache, err := goEnv(ctx, "GOMODCACHE")
	if err != nil {
		return err
	}
	// The plugins report their version as their own release builds do.
	ldflags := "-ldflags=-s -w -X " + cniplugins.Module + "/pkg/utils/buildversion.BuildVersion=" + cniplugins.Version
	args := append([]string{"install", "-trimpath", ldflags}, cniplugins.InstallArgs()...)
	env := []string{"GOPATH=" + gopath, "GOMODCACHE=" + modCache, "GOBIN=", "GOFLAGS="}
	if err := goTool(ctx, gopath, p, env, args...); err != nil {
		return fmt.Errorf("install CNI plugins %s for %s: %w", cniplugins.Version, p, err)
	}
	bin := filepath.Join(gopath, "bin")
	if _, err := os.Stat(filepath.Join(bin, p.OS+"_"+p.Arch)); err == nil {
		bin = filepath.Join(bin, p.OS+"_"+p.Arch)
	}
	for name := range cniplugins.Packages() {
		if err := moveFile(filepath.Join(bin, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("CNI plugin %s for %s: %w", name, p, err)
		}
	}
	return nil
}

// goTool runs the go tool in dir for platform p, linking statically, with
// extraEnv added to the environment.
func goTool(ctx context.Context, dir string, p Platform, extraEnv []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...) //nolint:gosec // G204: the go tool on arguments the release built
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOOS="+p.OS, "GOARCH="+p.Arch), extraEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 30))
	}
	return nil
}

// goEnv returns one variable of `go env`.
func goEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output() //nolint:gosec // G204: a fixed go env query
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// moveFile renames src to dst, copying when they are on different file systems.
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(filepath.Clean(src))
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil { //nolint:gosec // G306: an executable
		return fmt.Errorf("write %s: %w", dst, err)
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
