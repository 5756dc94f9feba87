package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ChartName is the chart's name (charts/estuary/Chart.yaml).
const ChartName = "estuary"

// Helm runs a helm binary.
type Helm struct {
	Bin string   // path of helm
	Env []string // added to the environment, e.g. HELM_REGISTRY_CONFIG
}

// Run runs helm with args and returns its combined output.
func (h Helm) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.Bin, args...) //nolint:gosec // G204: the helm binary the release was given
	cmd.Env = append(os.Environ(), h.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
	}
	return string(out), nil
}

// imageRegistryLine is the values.yaml line naming the registry of
// estuary's images.
var imageRegistryLine = regexp.MustCompile(`(?m)^imageRegistry:.*$`)

// SetImageRegistry returns values (a values.yaml) with its top-level
// imageRegistry set to registry, keeping every comment and other line.
func SetImageRegistry(values []byte, registry string) ([]byte, error) {
	if n := len(imageRegistryLine.FindAllIndex(values, -1)); n != 1 {
		return nil, fmt.Errorf("values.yaml has %d top-level imageRegistry lines, want 1", n)
	}
	return imageRegistryLine.ReplaceAllLiteral(values, []byte(fmt.Sprintf("imageRegistry: %q", registry))), nil
}

// ChartImages is what a packaged chart's values say of the release's images.
type ChartImages struct {
	Registry string            // imageRegistry; empty: unchanged
	Digests  map[string]string // values key (manager, daemon): <key>.image.digest
}

// apply sets the images of values (a values.yaml), keeping every comment and
// other line.
func (c ChartImages) apply(values []byte) ([]byte, error) {
	var err error
	if c.Registry != "" {
		if values, err = SetImageRegistry(values, c.Registry); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(c.Digests))
	for k := range c.Digests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if values, err = SetImageDigest(values, k, c.Digests[k]); err != nil {
			return nil, err
		}
	}
	return values, nil
}

// digestLine is an image's digest line in values.yaml, below <key>.image.
var digestLine = regexp.MustCompile(`^    digest:.*$`)

// SetImageDigest returns values (a values.yaml) with <key>.image.digest set
// to digest, keeping every comment and other line.
func SetImageDigest(values []byte, key, digest string) ([]byte, error) {
	lines := strings.Split(string(values), "\n")
	in, image, found := false, false, -1
	for i, l := range lines {
		switch {
		case len(l) > 0 && l[0] != ' ' && l[0] != '#':
			in, image = l == key+":", false
		case in && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") && !strings.HasPrefix(l, "  #"):
			image = l == "  image:"
		case in && image && digestLine.MatchString(l):
			if found >= 0 {
				return nil, fmt.Errorf("values.yaml has two %s.image.digest lines", key)
			}
			found = i
		}
	}
	if found < 0 {
		return nil, fmt.Errorf("values.yaml has no %s.image.digest line", key)
	}
	lines[found] = fmt.Sprintf("    digest: %q", digest)
	return []byte(strings.Join(lines, "\n")), nil
}

// PackageChart packages the chart in chartDir as version (version and
// appVersion) into outDir, its values' images set to images, and returns
// the archive's path.
func PackageChart(ctx context.Context, h Helm, chartDir, version string, images ChartImages, outDir string) (string, error) {
	tmp, err := os.MkdirTemp("", "estuary-chart-")
	if err != nil {
		return "", fmt.Errorf("create chart copy: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	chart := filepath.Join(tmp, ChartName)
	if err := copyTree(chartDir, chart); err != nil {
		return "", err
	}
	p := filepath.Join(chart, "values.yaml")
	values, err := os.ReadFile(filepath.Clean(p))
	if err != nil {
		return "", fmt.Errorf("read chart values: %w", err)
	}
	if values, err = images.apply(values); err != nil {
		return "", err
	}
	if err := os.WriteFile(p, values, 0o600); err != nil { //nolint:gosec // G703: the values file of the chart copy made above
		return "", fmt.Errorf("write chart values: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o750); err != nil {
		return "", fmt.Errorf("create %s: %w", outDir, err)
	}
	if _, err := h.Run(ctx, "package", chart, "--version", version, "--app-version", version, "--destination", outDir); err != nil {
		return "", fmt.Errorf("package chart: %w", err)
	}
	return filepath.Join(outDir, ChartName+"-"+version+".tgz"), nil
}

// PushChart pushes the packaged chart to oci://<registry>/charts and returns
// the reference helm installs it from.
func PushChart(ctx context.Context, h Helm, archive string, reg Registry) (string, error) {
	plain, err := reg.PlainHTTP()
	if err != nil {
		return "", err
	}
	args := []string{"push", archive, "oci://" + reg.Name + "/charts"}
	if plain {
		args = append(args, "--plain-http")
	}
	if _, err := h.Run(ctx, args...); err != nil {
		return "", fmt.Errorf("push chart: %w", err)
	}
	return "oci://" + reg.Name + "/charts/" + ChartName, nil
}

// copyTree copies the directory src, which holds no symbolic links, to dst,
// which must not exist.
func copyTree(src, dst string) error {
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}
