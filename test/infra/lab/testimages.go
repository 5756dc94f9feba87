package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/estuary-cni/estuary/test/infra/lab/images"
)

// testImages builds (or takes from the cache) the images of the upstream e2e
// tests under their upstream names: agnhost (also the lab's own agnhost tag),
// glibc-dns-testing, busybox and nginx. bin holds the Kubernetes binaries.
func (l *Lab) testImages(cache, bin string) ([]string, error) {
	// Debian's busybox, unpacked from its package by make lab-deps.
	busyboxBin := filepath.Join(l.opts.CacheDir, "debs", "busybox-root", "bin", "busybox")
	porter, err := l.porterDir()
	if err != nil {
		return nil, err
	}
	src := images.AgnhostSources{Agnhost: filepath.Join(bin, "agnhost"), Porter: porter, BusyBox: busyboxBin}
	if _, err := os.Stat(filepath.Join(bin, "coredns")); err == nil {
		src.CoreDNS = filepath.Join(bin, "coredns")
	}
	agn, err := images.Agnhost(src, AgnhostImage)
	if err != nil {
		return nil, fmt.Errorf("agnhost image: %w", err)
	}
	dns, err := images.GlibcDNS(busyboxBin)
	if err != nil {
		return nil, fmt.Errorf("glibc-dns-testing image: %w", err)
	}
	bb, err := images.BusyBox(busyboxBin)
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	ngx, err := images.Nginx(filepath.Join(l.opts.CacheDir, "debs", "nginx-root", "usr", "sbin", "nginx"), busyboxBin)
	if err != nil {
		return nil, fmt.Errorf("nginx image: %w", err)
	}
	var out []string
	for _, b := range []struct {
		base string
		img  images.Image
	}{{"agnhost", agn}, {"glibc-dns-testing", dns}, {"busybox", bb}, {"nginx", ngx}} {
		a, err := images.CachedFull(cache, b.base, b.img)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// porterDir is agnhost's porter directory in the pinned Kubernetes module
// (downloaded by hack/kube-binaries.sh), which holds the certificate and key
// the upstream image carries.
func (l *Lab) porterDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+l.opts.KubernetesVersion,
		"test", "images", "agnhost", "porter")
	if _, err := os.Stat(filepath.Join(dir, "localhost.crt")); err != nil {
		return "", fmt.Errorf("agnhost porter files of Kubernetes %s: %w (hack/kube-binaries.sh agnhost downloads them)",
			l.opts.KubernetesVersion, err)
	}
	return dir, nil
}
