package images

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// kubeadmPATH is the PATH of the control-plane images: kubeadm's static pods
// run `kube-apiserver ...` and the like by name.
const kubeadmPATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// xtablesModules matches the extensions Debian's iptables keeps in its
// architecture's library directory (/usr/lib/x86_64-linux-gnu/xtables), which
// xtables-nft-multi loads for matches and targets (-m comment, -j DNAT, ...).
const xtablesModules = "/usr/lib/*-linux-gnu/xtables/*.so"

// kubeProxyPrograms are the programs kube-proxy runs: iptables and ip6tables
// (nf_tables backend) with their save and restore forms, and nft for its
// nftables mode.
var kubeProxyPrograms = []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/nft"}

// xtablesLinks are the names kube-proxy calls iptables by, each a link to
// xtables-nft-multi.
var xtablesLinks = []string{"iptables", "iptables-save", "iptables-restore",
	"ip6tables", "ip6tables-save", "ip6tables-restore"}

// component is how one image of `kubeadm config images list` is built.
type component struct {
	binary     string         // file of hack/kube-binaries.sh's directory
	path       string         // where the binary goes in the image
	versionArg string         // the flag that prints the binary's version
	version    *regexp.Regexp // its version in that output
	entrypoint []string       // nil: the binary
}

var kubeVersion = regexp.MustCompile(`Kubernetes v(\S+)`)

// kubeadmComponents are the images kubeadm runs, by the last element of their
// repository.
var kubeadmComponents = map[string]component{
	"kube-apiserver":          kubeComponent("kube-apiserver"),
	"kube-controller-manager": kubeComponent("kube-controller-manager"),
	"kube-scheduler":          kubeComponent("kube-scheduler"),
	"kube-proxy":              kubeComponent("kube-proxy"),
	"etcd": {binary: "kubeadm-etcd", path: "/usr/local/bin/etcd", versionArg: "--version",
		version: regexp.MustCompile(`etcd Version: (\S+)`)},
	"coredns": {binary: "kubeadm-coredns", path: "/coredns", versionArg: "-version",
		version: regexp.MustCompile(`CoreDNS-(\S+)`), entrypoint: []string{"/coredns"}},
}

func kubeComponent(n string) component {
	return component{binary: n, path: "/usr/local/bin/" + n, versionArg: "--version", version: kubeVersion}
}

// Kubeadm returns one docker-archive per ref of `kubeadm config images list`,
// in the order of refs, each tagged exactly ref and cached in cacheDir by
// content: the control plane and kube-proxy from the binaries
// hack/kube-binaries.sh builds into bin (kube-proxy with iptables and nft from
// this machine's packages), etcd and CoreDNS from its kubeadm-etcd and
// kubeadm-coredns, each checked to be the version ref names, and pause from the
// pause program at pause (BuildPause). A ref of another image is an error.
func Kubeadm(cacheDir, bin, pause string, refs []string) ([]string, error) {
	archives := make([]string, 0, len(refs))
	for _, ref := range refs {
		img, base, err := kubeadmImage(bin, pause, ref)
		if err != nil {
			return nil, err
		}
		a, err := CachedFull(cacheDir, base, img)
		if err != nil {
			return nil, fmt.Errorf("kubeadm image %s: %w", ref, err)
		}
		archives = append(archives, a)
	}
	return archives, nil
}

// kubeadmImage returns the image of ref and the base name of its archive.
func kubeadmImage(bin, pause, ref string) (Image, string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Image{}, "", fmt.Errorf("kubeadm image %q: want repository:tag: %w", ref, err)
	}
	if !strings.HasSuffix(ref, ":"+tag.TagStr()) {
		return Image{}, "", fmt.Errorf("kubeadm image %q: want repository:tag, not a repository alone", ref)
	}
	repo := path.Base(tag.RepositoryStr())
	base := "kubeadm-" + repo
	if repo == "pause" {
		if pause == "" {
			return Image{}, "", fmt.Errorf("kubeadm image %s: no pause program (BuildPause builds it)", ref)
		}
		return Image{Tag: ref, Binary: pause, Path: "/pause"}, base, nil
	}
	c, ok := kubeadmComponents[repo]
	if !ok {
		return Image{}, "", fmt.Errorf("kubeadm image %s: unknown image %q (known: kube-apiserver, "+
			"kube-controller-manager, kube-scheduler, kube-proxy, etcd, coredns, pause)", ref, repo)
	}
	src := filepath.Join(bin, c.binary)
	if err := checkVersion(src, c, tag.TagStr()); err != nil {
		return Image{}, "", fmt.Errorf("kubeadm image %s: %w", ref, err)
	}
	img := Image{Tag: ref, Binary: src, Path: c.path, Entrypoint: c.entrypoint, Env: []string{kubeadmPATH}}
	if repo == "kube-proxy" {
		files, err := iptablesFiles()
		if err != nil {
			return Image{}, "", fmt.Errorf("kubeadm image %s: %w", ref, err)
		}
		img.Files = sortedFiles(files)
	}
	return img, base, nil
}

// imageRevision is the suffix of an image tag that counts rebuilds of one
// version (etcd:3.6.8-0).
var imageRevision = regexp.MustCompile(`-\d+$`)

// checkVersion runs the binary at src for its version and compares it with tag
// (v1.36.3, 3.6.8-0 and v1.14.2 all name their binary's version).
func checkVersion(src string, c component, tag string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("binary %s (hack/kube-binaries.sh %s builds it): %w", src, c.binary, err)
	}
	out, err := exec.Command(src, c.versionArg).CombinedOutput() //nolint:gosec // G204: binaries of the lab's own cache
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", src, c.versionArg, err, strings.TrimSpace(string(out)))
	}
	m := c.version.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("%s %s printed no version: %q", src, c.versionArg, lastLines(string(out), 3))
	}
	got, want := string(m[1]), imageRevision.ReplaceAllString(strings.TrimPrefix(tag, "v"), "")
	if got != want {
		return fmt.Errorf("%s is version %s, the image tag %s wants %s", src, got, tag, want)
	}
	return nil
}

// iptablesFiles returns the layer files of kube-proxy's programs: iptables
// (xtables-nft-multi under each name kube-proxy calls) with its extensions,
// and nft, with the shared objects of all of them.
func iptablesFiles() ([]File, error) {
	modules, err := filepath.Glob(xtablesModules)
	if err != nil || len(modules) == 0 {
		return nil, fmt.Errorf("iptables extensions in %s: none found (make lab-deps installs iptables)", xtablesModules)
	}
	files, err := Programs(append(append([]string{}, kubeProxyPrograms...), modules...)...)
	if err != nil {
		return nil, err
	}
	for _, l := range xtablesLinks {
		files = append(files, File{Path: "/usr/sbin/" + l, Link: "xtables-nft-multi"})
	}
	return files, nil
}
