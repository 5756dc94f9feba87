package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/images"
	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// The cluster DNS: CoreDNS, built by hack/kube-binaries.sh from the Go module
// proxy, installed as kubeadm installs it (Deployment coredns, Service kube-dns).
const (
	// CoreDNSImage is the CoreDNS image the lab imports into every node.
	CoreDNSImage = coreDNSRepo + ":lab"
	// DNSNamespace is where CoreDNS runs.
	DNSNamespace = EstuaryNamespace
	// ClusterDomain is the cluster's DNS domain (kubelet's clusterDomain).
	ClusterDomain = "cluster.local"

	coreDNSRepo = "estuary-lab.local/coredns"
	// dnsTimeout bounds the wait for the CoreDNS Deployment to roll out.
	dnsTimeout = 3 * time.Minute
)

// appendCoreDNS appends the CoreDNS image archive to archives: the coredns
// binary of bin packed as CoreDNSImage at /coredns, cached in cache.
func appendCoreDNS(archives []string, cache, bin string) ([]string, error) {
	src := filepath.Join(bin, "coredns")
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("coredns binary (hack/kube-binaries.sh coredns builds it): %w", err)
	}
	a, err := images.CachedFull(cache, "coredns", images.Image{Tag: CoreDNSImage, Binary: src, Path: "/coredns"})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", CoreDNSImage, err)
	}
	return append(archives, a), nil
}

// dnsManifest is the file the cluster DNS objects are applied from.
func (p Paths) dnsManifest() string { return filepath.Join(p.Root, "coredns.json") }

// installDNS applies the cluster DNS objects (render.CoreDNS) with the lab's
// kubectl and waits until the CoreDNS Deployment is Available.
func (l *Lab) installDNS(ctx context.Context, bin string) error {
	l.step("cluster DNS: CoreDNS as Service %s/%s at %s", DNSNamespace, render.CoreDNSService, l.plan.DNSService)
	o := render.CoreDNSOptions{Namespace: DNSNamespace, Image: CoreDNSImage,
		ClusterIP: l.plan.DNSService.String(), Domain: ClusterDomain}
	if s := l.plan.Secondary; s != nil {
		o.SecondIP = s.DNSService.String()
	}
	manifest, err := render.CoreDNS(o)
	if err != nil {
		return err
	}
	path := l.paths.dnsManifest()
	if err := os.WriteFile(path, manifest, 0o600); err != nil {
		return fmt.Errorf("write coredns manifest %s: %w", path, err)
	}
	if _, err := l.kubectl(ctx, bin, "apply", "-f", path); err != nil {
		return fmt.Errorf("apply coredns manifest: %w", err)
	}
	// The Deployment lives in the estuary namespace (kube-system), so the
	// install's own wait applies, with its stuck-pod detection and logs.
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	return l.rolloutStatus(ctx, bin, "deployment/"+render.CoreDNSName)
}
