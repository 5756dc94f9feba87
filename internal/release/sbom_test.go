package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// readSBOM decodes a CycloneDX JSON file, checking its format and version.
func readSBOM(t *testing.T, path string) *cdx.BOM {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		BOMFormat   string `json:"bomFormat"`
		SpecVersion string `json:"specVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil || head.BOMFormat != "CycloneDX" || head.SpecVersion != "1.6" {
		t.Fatalf("%s: bomFormat %q specVersion %q (%v), want CycloneDX 1.6", path, head.BOMFormat, head.SpecVersion, err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(strings.NewReader(string(data)), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &bom
}

// goModVersion is the version go.mod requires of module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return string(m[1])
}

func components(bom *cdx.BOM) map[string]cdx.Component {
	out := map[string]cdx.Component{}
	if bom.Components != nil {
		for _, c := range *bom.Components {
			out[c.BOMRef] = c
		}
	}
	return out
}

// TestSBOMListsTheBinarysModules builds a small command linking two
// modules with the release's builder and writes the SBOM of an archive
// holding it, read with the release's build info reader: it is CycloneDX
// 1.6 JSON whose subject carries the archive's digest, and it lists the
// binary with its hash, the main module at the release's version and the
// two modules at the versions go.mod requires, with the SHA-256 of their
// go.sum hash.
func TestSBOMListsTheBinarysModules(t *testing.T) {
	dir := t.TempDir()
	if err := (GoBuilder{Repo: "testdata"}).Commands(context.Background(), Platform{runtime.GOOS, runtime.GOARCH}, dir,
		Command{Path: "./cmd/withdeps"}); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(dir, "withdeps")
	digest := "sha256:" + strings.Repeat("ab", 32)
	bom, err := SBOM(Subject{Name: "a.tar.gz", Version: testVersion, Type: cdx.ComponentTypeFile, Digest: digest},
		[]Binary{{Source: self, Path: "/withdeps", Platform: Platform{"linux", "amd64"}}}, readBuildInfo, "v"+testVersion, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.tar.gz"+SBOMSuffix)
	if err := WriteSBOM(path, bom); err != nil {
		t.Fatal(err)
	}
	got := readSBOM(t, path)
	subject := got.Metadata.Component
	if subject == nil || subject.Name != "a.tar.gz" || subject.Hashes == nil || (*subject.Hashes)[0].Value != strings.Repeat("ab", 32) {
		t.Fatalf("subject %+v, want a.tar.gz with SHA-256 %s", subject, digest)
	}
	cs := components(got)
	bin, ok := cs["linux/amd64:/withdeps"]
	self256, _ := FileSHA256(self)
	if !ok || bin.Type != cdx.ComponentTypeApplication || bin.Hashes == nil || (*bin.Hashes)[0].Value != self256 {
		t.Fatalf("binary component %+v, want the test binary with SHA-256 %s", bin, self256)
	}
	if main := GoModulePURL("github.com/estuary-cni/estuary", "v"+testVersion); cs[main].PackageURL != main {
		t.Errorf("no main module %s in %v", main, keysOf(cs))
	}
	for _, mod := range []string{"github.com/google/go-containerregistry", "sigs.k8s.io/yaml"} {
		purl := "pkg:golang/" + mod + "@" + goModVersion(t, mod)
		c, ok := cs[purl]
		if !ok || c.Type != cdx.ComponentTypeLibrary || c.Name != mod || c.Hashes == nil || len((*c.Hashes)[0].Value) != 64 {
			t.Errorf("module %s: component %+v (present %v)", purl, c, ok)
		}
	}
	if got.Dependencies == nil || (*got.Dependencies)[0].Ref != "a.tar.gz@"+digest {
		t.Errorf("dependencies do not start at the subject: %+v", got.Dependencies)
	}
}

func keysOf(m map[string]cdx.Component) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkSBOMs checks a release's SBOMs: one per image, its subject the
// index's digest, listing each platform's binaries with their hashes; one
// per plugin archive beside it, its subject the archive's digest, in the
// checksums file.
func checkSBOMs(t *testing.T, o Options, r Result) {
	t.Helper()
	if len(r.SBOMs) != 2+len(r.Archives) {
		t.Errorf("SBOMs %v, want one per image and archive", r.SBOMs)
	}
	for _, spec := range []ImageSpec{ManagerImage, DaemonImage} {
		bom := readSBOM(t, filepath.Join(o.Out, "sbom", spec.Name+"_"+testVersion+SBOMSuffix))
		s := bom.Metadata.Component
		if s.Type != cdx.ComponentTypeContainer || s.BOMRef != spec.Name+"@"+r.Digests[spec.Name] || !strings.Contains(s.PackageURL, "@sha256%3A") {
			t.Errorf("%s SBOM subject %+v, want the index %s", spec.Name, s, r.Digests[spec.Name])
		}
		cs := components(bom)
		names := []string{"estuary-manager"}
		if spec.Name == DaemonImage.Name {
			names = append([]string{"estuary-daemon", "estuary-cni"}, pluginNames()...)
		}
		for _, p := range o.ImagePlatforms {
			for _, n := range names {
				path := "/" + n
				if n != "estuary-daemon" && n != "estuary-cni" && n != "estuary-manager" {
					path = "/plugins/" + n
				}
				sum := sha256.Sum256([]byte(fakeContent(n, p)))
				if c, ok := cs[p.String()+":"+path]; !ok || (*c.Hashes)[0].Value != hex.EncodeToString(sum[:]) {
					t.Errorf("%s SBOM: %s %s missing or with another hash: %+v", spec.Name, p, path, c)
				}
			}
		}
	}
	sums, err := os.ReadFile(r.Checksums)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Archives {
		bom := readSBOM(t, a.Path+SBOMSuffix)
		if s := bom.Metadata.Component; s.Type != cdx.ComponentTypeFile || (*s.Hashes)[0].Value != a.SHA256 {
			t.Errorf("%s SBOM subject %+v, want SHA-256 %s", a.Path, s, a.SHA256)
		}
		sum, _ := FileSHA256(a.SBOM)
		if !strings.Contains(string(sums), sum+"  "+filepath.Base(a.SBOM)+"\n") {
			t.Errorf("checksums %q lack %s", sums, filepath.Base(a.SBOM))
		}
	}
}

func TestSetImageDigest(t *testing.T) {
	in := "manager:\n  image:\n    repository: \"\"\n    digest: \"\"\n  other:\n    digest: kept\n" +
		"daemon:\n  # c\n  image:\n    digest: \"\"\n"
	d := "sha256:" + strings.Repeat("0", 64)
	out, err := SetImageDigest([]byte(in), "daemon", d)
	want := strings.Replace(in, "image:\n    digest: \"\"\n", "image:\n    digest: \""+d+"\"\n", 2)
	want = strings.Replace(want, "    digest: \""+d+"\"\n  other", "    digest: \"\"\n  other", 1)
	if err != nil || string(out) != want {
		t.Errorf("SetImageDigest(daemon) =\n%s, %v; want\n%s", out, err, want)
	}
	if _, err := SetImageDigest([]byte("manager:\n  image:\n    tag: x\n"), "manager", d); err == nil {
		t.Error("values without manager.image.digest accepted")
	}
}
