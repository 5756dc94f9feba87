package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/internal/lab/images"
	"github.com/estuary-cni/estuary/internal/lab/render"
)

// The cluster DNS: CoreDNS, built by hack/kube-binaries.sh from the Go module
// proxy, installed as kubeadm installs it (Deployment coredns, Service kube-dns).
const (
	// CoreDNSImage is the CoreDNS image the lab imports into every node.
	CoreDNSImage = coreDNSRepo + ":lab"
	// DNSNamespace is where CoreDNS runs.
	DNSNamespace = "kube-system"
	// ClusterDomain is the cluster's DNS domain (kubelet's clusterDomain).
	ClusterDomain = "cluster.local"

	coreDNSRepo = "estuary-lab.local/coredns"
	// dnsTimeout bounds the wait for the CoreDNS Deployment to be Available.
	dnsTimeout = 3 * time.Minute
)

// appendCoreDNS appends the CoreDNS image archive to archives: the coredns
// binary of bin packed as CoreDNSImage at /coredns, cached in cache.
func appendCoreDNS(archives []string, cache, bin string) ([]string, error) {
	src := filepath.Join(bin, "coredns")
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("coredns binary (hack/kube-binaries.sh coredns builds it): %w", err)
	}
	a, err := images.Cached(cache, CoreDNSImage, src, "/coredns")
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
	manifest, err := render.CoreDNS(render.CoreDNSOptions{Namespace: DNSNamespace, Image: CoreDNSImage,
		ClusterIP: l.plan.DNSService.String(), Domain: ClusterDomain})
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
	return l.waitDNS(ctx, bin)
}

// waitDNS polls the CoreDNS Deployment until it is Available with a ready
// replica, for at most dnsTimeout; the error shows the CoreDNS pods and logs.
func (l *Lab) waitDNS(ctx context.Context, bin string) error {
	ctx, cancel := context.WithTimeout(ctx, dnsTimeout)
	defer cancel()
	deploy := "deployment/" + render.CoreDNSName
	var last string
	var lastErr error
	for {
		if err := l.exited(); err != nil {
			return err
		}
		last, lastErr = l.kubectl(ctx, bin, "get", deploy, "-n", DNSNamespace, "-o",
			`jsonpath={.status.conditions[?(@.type=="Available")].status}/{.status.availableReplicas}`)
		if lastErr == nil && dnsAvailable(last) {
			return nil
		}
		select {
		case <-ctx.Done():
			err := ctx.Err()
			if lastErr != nil {
				err = fmt.Errorf("%w; last error: %w", err, lastErr)
			}
			return fmt.Errorf("%s in %s not Available after %s (Available/replicas %q): %w\n%s",
				deploy, DNSNamespace, dnsTimeout, last, err, l.dnsDiagnostics(bin))
		case <-time.After(time.Second):
		}
	}
}

// dnsAvailable reads "<Available condition>/<available replicas>".
func dnsAvailable(s string) bool {
	cond, replicas, _ := strings.Cut(strings.TrimSpace(s), "/")
	return cond == "True" && replicas != "" && replicas != "0"
}

// dnsDiagnostics returns the CoreDNS pods and their last log lines.
func (l *Lab) dnsDiagnostics(bin string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sel := "k8s-app=" + render.CoreDNSAppLabel
	pods, _ := l.kubectl(ctx, bin, "get", "pods", "-n", DNSNamespace, "-l", sel, "-o", "wide")
	events, _ := l.kubectl(ctx, bin, "get", "events", "-n", DNSNamespace, "--field-selector", "involvedObject.kind=Pod")
	logs, _ := l.kubectl(ctx, bin, "logs", "-n", DNSNamespace, "-l", sel, "--tail", "15", "--all-containers")
	return fmt.Sprintf("%s\n%s\n--- coredns logs:\n%s", strings.TrimSpace(pods), lastLines(events, 10), strings.TrimSpace(logs))
}
