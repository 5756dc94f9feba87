package images

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testKubeBin is where hack/kube-binaries.sh builds the pinned Kubernetes.
const testKubeBin = "/var/cache/estuary/kube/v1.36.3-etcd-v3.6.5/bin"

// kubeadmBinaries are the components the kubeadm images are built from.
var kubeadmBinaries = []string{"kubeadm", "kubeadm-etcd", "kubeadm-coredns", "kube-proxy",
	"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// TestKubeadmImages builds every image the pinned kubeadm lists from the real
// binaries and reads each archive back under its ref: the tag, entrypoint,
// PATH and binary, and for kube-proxy iptables under each name kube-proxy
// calls, its shared objects and extensions, which run chrooted in the
// unpacked layer.
func TestKubeadmImages(t *testing.T) {
	for _, b := range kubeadmBinaries {
		if _, err := os.Stat(filepath.Join(testKubeBin, b)); err != nil {
			t.Skipf("%s is not built (bash hack/kube-binaries.sh %s)", b, strings.Join(kubeadmBinaries, " "))
		}
	}
	out, err := exec.Command(filepath.Join(testKubeBin, "kubeadm"), "config", "images", "list", //nolint:gosec // G204: the lab's cached kubeadm
		"--kubernetes-version", "v1.36.3").Output()
	if err != nil {
		t.Fatalf("kubeadm config images list: %v", err)
	}
	refs := strings.Fields(string(out))
	cache := t.TempDir()
	pause, err := BuildPause(filepath.Join("..", "..", "..", "..", "hack", "images", "pause"), cache)
	if err != nil {
		t.Fatal(err)
	}
	archives, err := Kubeadm(cache, testKubeBin, pause, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(archives) != len(refs) || len(refs) != 7 {
		t.Fatalf("%d archives for refs %v; want one for each of the 7", len(archives), refs)
	}
	for i, ref := range refs {
		v := readTagged(t, archives[i], ref)
		cfg, err := v.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		repo := path.Base(strings.Split(ref, ":")[0])
		want := map[string]string{"etcd": "/usr/local/bin/etcd", "coredns": "/coredns", "pause": "/pause"}[repo]
		if want == "" {
			want = "/usr/local/bin/" + repo
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{want}) {
			t.Errorf("%s: entrypoint %v, want [%s]", ref, cfg.Config.Entrypoint, want)
		}
		if repo != "pause" && !slices.Equal(cfg.Config.Env, []string{kubeadmPATH}) {
			t.Errorf("%s: env %v, want [%s]", ref, cfg.Config.Env, kubeadmPATH)
		}
		layer := layerEntries(t, v)
		if e, ok := layer[strings.TrimPrefix(want, "/")]; !ok || e.hdr.Mode != 0o755 || e.hdr.Size < 1<<20 && repo != "pause" {
			t.Errorf("%s: layer has no executable %s (has %v)", ref, want, keys(layer))
		}
		if repo == "kube-proxy" {
			checkKubeProxyLayer(t, archives[i], ref, layer)
		}
	}
	again, err := Kubeadm(cache, testKubeBin, pause, refs)
	if err != nil || !slices.Equal(again, archives) {
		t.Errorf("second Kubeadm = %v, %v; want the cached %v", again, err, archives)
	}
}

// checkKubeProxyLayer checks that kube-proxy's layer holds iptables and runs it.
func checkKubeProxyLayer(t *testing.T, archive, ref string, layer map[string]layerEntry) {
	t.Helper()
	for _, l := range xtablesLinks {
		if e := layer["usr/sbin/"+l]; e.hdr == nil || e.hdr.Linkname != "xtables-nft-multi" {
			t.Errorf("%s: usr/sbin/%s is not a link to xtables-nft-multi", ref, l)
		}
	}
	modules, _ := filepath.Glob(xtablesModules)
	libs, err := sharedObjects("/usr/sbin/xtables-nft-multi")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(append([]string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/nft"}, libs...), modules...) {
		if _, ok := layer[strings.TrimPrefix(p, "/")]; !ok {
			t.Errorf("%s: layer has no %s", ref, p)
		}
	}
	if len(modules) < 50 || len(libs) < 4 {
		t.Errorf("%d xtables modules, %d shared objects of xtables-nft-multi: iptables is not what kube-proxy needs", len(modules), len(libs))
	}
	if os.Geteuid() != 0 {
		t.Log("not root: iptables is not run chrooted in the image")
		return
	}
	layers, err := readTagged(t, archive, ref).Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	root := extract(t, rc)
	for _, args := range [][]string{
		{"iptables", "--version"}, {"ip6tables-restore", "--version"}, {"iptables-save", "--version"},
	} {
		if out := chrootRun(t, root, args...); !strings.Contains(out, "nf_tables") {
			t.Errorf("%v in the image: %q, want the nf_tables backend", args, out)
		}
	}
	// -m comment and -j DNAT load extensions from the image's xtables directory.
	for _, ext := range [][]string{{"iptables", "-m", "comment", "--help"}, {"iptables", "-j", "DNAT", "--help"}} {
		if out := chrootRun(t, root, ext...); !strings.Contains(out, ext[2]) {
			t.Errorf("%v in the image did not load the extension: %q", ext, out)
		}
	}
}

// TestKubeadmRejectsBadRefs: a ref of an image kubeadm's set does not have, a
// ref without a tag, and a binary of another version than the ref's tag are
// each refused with an error naming the ref, and write nothing.
func TestKubeadmRejectsBadRefs(t *testing.T) {
	bin, cache := t.TempDir(), t.TempDir()
	etcd := "#!/bin/sh\necho 'etcd Version: 3.6.7'\n"
	if err := os.WriteFile(filepath.Join(bin, "kubeadm-etcd"), []byte(etcd), 0o755); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"registry.k8s.io/kube-foo:v1.36.3":        `unknown image "kube-foo"`,
		"registry.k8s.io/etcd":                    "want repository:tag",
		"registry.k8s.io/etcd:3.6.8-0":            "version 3.6.7, the image tag 3.6.8-0 wants 3.6.8",
		"registry.k8s.io/coredns/coredns:v1.14.2": "hack/kube-binaries.sh kubeadm-coredns",
		"registry.k8s.io/pause:3.10.2":            "no pause program",
	} {
		_, err := Kubeadm(cache, bin, "", []string{ref})
		if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), want) {
			t.Errorf("Kubeadm(%s) error %v; want one naming the ref and %q", ref, err, want)
		}
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("refused refs left %d files in the cache", len(entries))
	}
}
