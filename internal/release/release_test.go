package release

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

const testVersion = "0.2.0-rc.1"

// fakeBuilder writes small files in place of binaries: "<name> <os>/<arch>".
type fakeBuilder struct{}

func fakeContent(name string, p Platform) string { return name + " " + p.String() }

func (fakeBuilder) Commands(_ context.Context, p Platform, dir string, cmds ...Command) error {
	for _, c := range cmds {
		if err := os.WriteFile(filepath.Join(dir, c.Name()), []byte(fakeContent(c.Name(), p)), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (fakeBuilder) CNIPlugins(_ context.Context, p Platform, dir string) error {
	for _, n := range pluginNames() {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(fakeContent(n, p)), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// helm returns the checkout's helm (make helm) with its files in a
// temporary directory.
func helm(t *testing.T) Helm {
	t.Helper()
	bin, err := filepath.Abs("../../bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if h := os.Getenv("HELM"); h != "" {
		bin = h
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm is not installed (%v): run `make helm`, or set HELM", err)
	}
	home := t.TempDir()
	return Helm{Bin: bin, Env: []string{"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}}
}

func testOptions(t *testing.T, reg string) Options {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Version: testVersion, Registry: Registry{Name: reg}, Repo: repo, Out: t.TempDir(), Helm: helm(t),
		Commit: "0123456789abcdef0123456789abcdef01234567", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Builder: fakeBuilder{}, BuildInfo: testBuildInfo,
	}
}

// testBuildInfo stands for the build information of fakeBuilder's files:
// the test binary's own.
func testBuildInfo(string) (*debug.BuildInfo, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return buildinfo.ReadFile(self)
}

// TestReleaseToRegistry cuts a release into an in-process registry and reads
// everything back: both images as indexes of both platforms with the OCI
// labels and their entrypoints, the daemon's CNI binaries, the chart pulled
// with helm naming the pushed images, and the plugin archives against the
// checksums and the krew manifest.
func TestReleaseToRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	reg := strings.TrimPrefix(srv.URL, "http://") + "/estuary"
	o := testOptions(t, reg)
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []ImageSpec{ManagerImage, DaemonImage} {
		if !strings.HasPrefix(r.Images[spec.Name], reg+"/"+spec.Name+"@sha256:") {
			t.Errorf("image %s pushed as %q", spec.Name, r.Images[spec.Name])
		}
		ref, err := name.ParseReference(reg + "/" + spec.Name + ":" + testVersion)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		checkIndex(t, o, spec, idx)
	}
	checkChart(t, o, r)
	checkPlugin(t, o, r)
	checkSBOMs(t, o, r)
}

// checkIndex checks an index has one image per platform, labelled, with its
// entrypoint and files.
func checkIndex(t *testing.T, o Options, spec ImageSpec, idx v1.ImageIndex) {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || m.Annotations[LabelVersion] != testVersion || m.Annotations[LabelRevision] != o.Commit {
		t.Errorf("%s index: media type %s annotations %v", spec.Name, m.MediaType, m.Annotations)
	}
	var platforms []string
	for _, d := range m.Manifests {
		p := Platform{OS: d.Platform.OS, Arch: d.Platform.Architecture}
		platforms = append(platforms, p.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, o, spec, p, img)
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("%s index platforms %v, want linux/amd64 and linux/arm64", spec.Name, platforms)
	}
}

func checkImage(t *testing.T, o Options, spec ImageSpec, p Platform, img v1.Image) {
	t.Helper()
	what := spec.Name + " " + p.String()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Arch || !slices.Equal(cfg.Config.Entrypoint, spec.Entrypoint) {
		t.Errorf("%s: config %s/%s entrypoint %v, want %v", what, cfg.OS, cfg.Architecture, cfg.Config.Entrypoint, spec.Entrypoint)
	}
	want := map[string]string{
		LabelTitle: spec.Name, LabelVersion: testVersion, LabelRevision: o.Commit, LabelSource: DefaultSource,
		LabelLicenses: "Apache-2.0", LabelCreated: "2026-01-02T03:04:05Z", LabelDescription: spec.Description,
	}
	for k, v := range want {
		if cfg.Config.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", what, k, cfg.Config.Labels[k], v)
		}
	}
	files := imageFiles(t, img)
	wantFiles := map[string]string{"estuary-manager": fakeContent("estuary-manager", p)}
	if spec.Name == DaemonImage.Name {
		wantFiles = map[string]string{"estuary-daemon": fakeContent("estuary-daemon", p), "estuary-cni": fakeContent("estuary-cni", p)}
		for _, n := range []string{"loopback", "portmap", "bandwidth", "tuning"} {
			wantFiles["plugins/"+n] = fakeContent(n, p)
		}
	}
	for f, content := range wantFiles {
		if files[f] != content {
			t.Errorf("%s: %s holds %q, want %q (files %v)", what, f, files[f], content, keys(files))
		}
	}
}

// imageFiles returns the regular files of an image's layers by path.
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range readTar(t, rc) {
			files[name] = data
		}
		_ = rc.Close()
	}
	return files
}

func readTar(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkChart pulls the chart back with helm and renders it: version and
// appVersion are the release's, its values hold the images' digests, and it
// renders the pushed images by digest.
func checkChart(t *testing.T, o Options, r Result) {
	t.Helper()
	if r.ChartRef != "oci://"+o.Registry.Name+"/charts/estuary" {
		t.Errorf("chart pushed as %q", r.ChartRef)
	}
	dir := t.TempDir()
	if _, err := o.Helm.Run(context.Background(), "pull", r.ChartRef, "--version", testVersion, "--plain-http", "--destination", dir); err != nil {
		t.Fatal(err)
	}
	pulled := filepath.Join(dir, "estuary-"+testVersion+".tgz")
	show, err := o.Helm.Run(context.Background(), "show", "chart", pulled)
	if err != nil {
		t.Fatal(err)
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal([]byte(show), &chart); err != nil || chart.Version != testVersion || chart.AppVersion != testVersion {
		t.Errorf("pulled chart: version %q appVersion %q (%v), want %s", chart.Version, chart.AppVersion, err, testVersion)
	}
	out, err := o.Helm.Run(context.Background(), "template", "estuary", pulled, "--kube-version", "v1.32.0")
	if err != nil {
		t.Fatal(err)
	}
	shown, err := o.Helm.Run(context.Background(), "show", "values", pulled)
	if err != nil {
		t.Fatal(err)
	}
	type component struct {
		Image struct{ Digest string }
	}
	var values struct{ Manager, Daemon component }
	if err := yaml.Unmarshal([]byte(shown), &values); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec   ImageSpec
		values component
	}{{ManagerImage, values.Manager}, {DaemonImage, values.Daemon}} {
		spec, digest := c.spec, c.values.Image.Digest
		if !strings.HasPrefix(digest, "sha256:") || digest != r.Digests[spec.Name] {
			t.Errorf("the pulled chart's %s.image.digest is %q, want the index's %s", spec.Values, digest, r.Digests[spec.Name])
		}
		ref := o.Registry.Name + "/" + spec.Name + "@" + digest
		if ref != r.Images[spec.Name] {
			t.Errorf("%s pushed as %s, the chart names %s", spec.Name, r.Images[spec.Name], ref)
		}
		if want := fmt.Sprintf("image: %q", ref); !strings.Contains(out, want) {
			t.Errorf("the pulled chart does not render %s", want)
		}
	}
}

// checkPlugin checks each archive against the checksums file and the krew
// manifest, and what it holds.
func checkPlugin(t *testing.T, o Options, r Result) {
	t.Helper()
	sums, err := os.ReadFile(r.Checksums)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(r.KrewManifest)
	if err != nil {
		t.Fatal(err)
	}
	var m KrewPlugin
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "estuary" ||
		m.Spec.Version != "v"+testVersion || len(m.Spec.Platforms) != len(DefaultPluginPlatforms) {
		t.Fatalf("krew manifest:\n%s", b)
	}
	for i, p := range DefaultPluginPlatforms {
		archive := filepath.Join(o.Out, "plugin", ArchiveName(testVersion, p))
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		hexSum := hex.EncodeToString(sum[:])
		kp := m.Spec.Platforms[i]
		if kp.SHA256 != hexSum || kp.Selector.MatchLabels["os"] != p.OS || kp.Selector.MatchLabels["arch"] != p.Arch ||
			kp.URI != "https://github.com/estuary-cni/estuary/releases/download/v"+testVersion+"/"+filepath.Base(archive) || kp.Bin != PluginName {
			t.Errorf("krew platform %d: %+v; want %s, sha256 %s", i, kp, p, hexSum)
		}
		if !strings.Contains(string(sums), hexSum+"  "+filepath.Base(archive)+"\n") {
			t.Errorf("checksums %q lack %s", sums, filepath.Base(archive))
		}
		gz, err := gzip.NewReader(strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		files := readTar(t, gz)
		if files[PluginName] != fakeContent(PluginName, p) || !strings.Contains(files["LICENSE"], "Apache License") {
			t.Errorf("%s holds %v", archive, keys(files))
		}
		if !strings.Contains(files[CompletionName], `exec kubectl-estuary __complete "$@"`) {
			t.Errorf("%s: completion script %q", archive, files[CompletionName])
		}
	}
}

// TestReleaseWithoutRegistry writes OCI layouts and packages the chart
// without pushing anything.
func TestReleaseWithoutRegistry(t *testing.T) {
	o := testOptions(t, "")
	o.PluginPlatforms = []Platform{{"linux", "amd64"}}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.ChartRef != "" || filepath.Base(r.Chart) != "estuary-"+testVersion+".tgz" {
		t.Errorf("chart %s pushed to %q", r.Chart, r.ChartRef)
	}
	for _, spec := range []ImageSpec{ManagerImage, DaemonImage} {
		p, err := layout.FromPath(r.Images[spec.Name])
		if err != nil {
			t.Fatal(err)
		}
		top, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		m, err := top.IndexManifest()
		if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Annotations[LabelRefName] != testVersion {
			t.Fatalf("%s layout index: %+v, %v", spec.Name, m, err)
		}
		idx, err := top.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkIndex(t, o, spec, idx)
	}
	checkSBOMs(t, o, r)
}

func TestOptionsRefuse(t *testing.T) {
	for _, v := range []string{"", "v0.2.0", "0.2", "0.2.0+build.1", "latest"} {
		o := Options{Version: v, Commit: "c", Created: time.Now()}
		if err := o.complete(); err == nil {
			t.Errorf("version %q accepted", v)
		}
	}
	for _, reg := range []string{"Not A Registry", "myregistry/estuary"} {
		o := Options{Version: "0.2.0", Commit: "c", Created: time.Now(), Registry: Registry{Name: reg}}
		if err := o.complete(); err == nil {
			t.Errorf("registry %q accepted", reg)
		}
	}
	for _, reg := range []string{"localhost:5000/estuary", "registry.example", "registry.example/a/b", "[::1]:5000/x"} {
		o := Options{Version: "0.2.0", Commit: "c", Created: time.Now(), Registry: Registry{Name: reg}}
		if err := o.complete(); err != nil {
			t.Errorf("registry %q: %v", reg, err)
		}
	}
}

func TestSetImageRegistry(t *testing.T) {
	in := []byte("# the registry\nimageRegistry: estuary.local\nmanager:\n  imageRegistry: kept\n")
	out, err := SetImageRegistry(in, "127.0.0.1:5000/estuary")
	if err != nil || string(out) != "# the registry\nimageRegistry: \"127.0.0.1:5000/estuary\"\nmanager:\n  imageRegistry: kept\n" {
		t.Errorf("SetImageRegistry = %q, %v", out, err)
	}
	if _, err := SetImageRegistry([]byte("manager: {}\n"), "r"); err == nil {
		t.Error("values without imageRegistry accepted")
	}
}
