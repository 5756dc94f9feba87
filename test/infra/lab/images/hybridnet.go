package images

import (
	"fmt"
	"os"
	"path/filepath"
)

// HybridnetSources are what hybridnet's image is made of: its own source
// tree and binaries, and the webhook's serving certificate.
type HybridnetSources struct {
	// Src is hybridnet's source tree: dist/images (the daemon's start and CNI
	// install scripts, the conflist) and policy (the felix init scripts its
	// DaemonSet runs).
	Src string
	// Bin holds `go build ./cmd/...`'s four binaries: cni, daemon, manager
	// and webhook.
	Bin string
	// Certs holds tls.crt and tls.key, the webhook's serving certificate,
	// made as hybridnet's image build makes it (signed by the CA its chart's
	// webhook configurations trust).
	Certs string
}

// hybridnetPrograms are what hybridnet's image (Dockerfile.amd64, its last
// stage) adds to the binaries, from this machine's Debian packages: bash
// for its scripts, iproute2, ipset and conntrack; iptables comes with
// iptablesFiles. sh is bash, as the DaemonSet runs `sh start-daemon.sh`,
// a bash script.
var hybridnetPrograms = []string{"/usr/bin/bash", "/usr/bin/env", "/usr/bin/cp", "/usr/bin/rm",
	"/usr/sbin/ip", "/usr/sbin/tc", "/usr/sbin/ipset", "/usr/sbin/conntrack"}

// hybridnetPlugins are the reference CNI plugins its image carries in
// /cni-plugins for install-cni.sh (the chart's neededCommunityCNIPlugins).
var hybridnetPlugins = []string{"loopback", "bandwidth"}

// Hybridnet writes hybridnet's image, tagged tag, laid out as its
// Dockerfile.amd64 lays it out (binaries and scripts in /hybridnet, the
// reference plugins in /cni-plugins, the webhook's certificate in
// /tmp/k8s-webhook-server/serving-certs), and returns the archive's path,
// cached in cacheDir by content. Its policy agent (felix) is not in it.
func Hybridnet(cacheDir, tag, pluginDir string, s HybridnetSources) (string, error) {
	files := []File{
		{Source: filepath.Join(s.Bin, "cni"), Path: "/hybridnet/hybridnet"},
		{Source: filepath.Join(s.Bin, "daemon"), Path: "/hybridnet/hybridnet-daemon"},
		{Source: filepath.Join(s.Bin, "manager"), Path: "/hybridnet/hybridnet-manager"},
		{Source: filepath.Join(s.Bin, "webhook"), Path: "/hybridnet/hybridnet-webhook"},
		{Source: filepath.Join(s.Src, "dist", "images", "start-daemon.sh"), Path: "/hybridnet/start-daemon.sh"},
		{Source: filepath.Join(s.Src, "dist", "images", "install-cni.sh"), Path: "/hybridnet/install-cni.sh"},
		{Source: filepath.Join(s.Src, "dist", "images", "00-hybridnet.conflist"), Path: "/hybridnet/00-hybridnet.conflist", Mode: 0o644},
		{Source: filepath.Join(s.Src, "policy", "policyinit.sh"), Path: "/hybridnet/policyinit.sh"},
		{Source: filepath.Join(s.Src, "policy", "uninstall-policy.sh"), Path: "/hybridnet/uninstall-policy.sh"},
		{Source: filepath.Join(s.Certs, "tls.crt"), Path: "/tmp/k8s-webhook-server/serving-certs/tls.crt", Mode: 0o644},
		{Source: filepath.Join(s.Certs, "tls.key"), Path: "/tmp/k8s-webhook-server/serving-certs/tls.key", Mode: 0o600},
		{Path: "/bin/sh", Link: "/usr/bin/bash"},
		{Path: "/bin/bash", Link: "/usr/bin/bash"},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/run", Dir: true},
	}
	for _, p := range hybridnetPlugins {
		files = append(files, File{Source: filepath.Join(pluginDir, p), Path: "/cni-plugins/" + p})
	}
	for _, f := range files {
		if f.Source == "" {
			continue
		}
		if _, err := os.Stat(f.Source); err != nil {
			return "", fmt.Errorf("hybridnet image: %w", err)
		}
	}
	progs, err := Programs(hybridnetPrograms...)
	if err != nil {
		return "", fmt.Errorf("hybridnet image: %w", err)
	}
	ipt, err := iptablesFiles()
	if err != nil {
		return "", fmt.Errorf("hybridnet image: %w", err)
	}
	files = append(append(files, progs...), ipt...)
	img := Image{Tag: tag, Files: files, Entrypoint: []string{}, Env: []string{kubeadmPATH}}
	return CachedFull(cacheDir, "hybridnet", img)
}
