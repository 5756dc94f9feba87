// Package render owns the text of every configuration file the lab writes:
// containerd, kubelet, kube-proxy, the reference CNI conflist and the router's BIRD
// configuration. Everything here is a pure function of its inputs so it can be
// tested without a kernel or a cluster.
package render

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// ContainerdOptions are the per-node changes to containerd's default configuration.
type ContainerdOptions struct {
	SandboxImage string
	Root         string // containerd root (per-node through the node's mount namespace)
	State        string
	Address      string // grpc socket path
	CNIBinDir    string
	CNIConfDir   string
	// RegistryConfigPath is the CRI plugin's registry config_path: one
	// directory per registry host holding its hosts.toml; empty: none.
	RegistryConfigPath string
}

// Containerd edits the output of `containerd config default` (version 2 format):
// the CRI plugin must not lower oom_score_adj (the machine lacks CAP_SYS_RESOURCE),
// uses the locally built pause image, and every path is the node's own.
func Containerd(def string, o ContainerdOptions) (string, error) {
	edits := []struct{ key, value string }{
		{"restrict_oom_score_adj", "true"},
		{"sandbox_image", quote(o.SandboxImage)},
		{"bin_dir", quote(o.CNIBinDir)},
		{"conf_dir", quote(o.CNIConfDir)},
		{"root", quote(o.Root)},
		{"state", quote(o.State)},
		{"config_path", quote(o.RegistryConfigPath)},
	}
	out := def
	for _, e := range edits {
		re := regexp.MustCompile(`(?m)^(\s*)` + regexp.QuoteMeta(e.key) + ` = .*$`)
		if !re.MatchString(out) {
			return "", fmt.Errorf("containerd default config has no %q setting", e.key)
		}
		out = re.ReplaceAllString(out, "${1}"+e.key+" = "+strings.ReplaceAll(e.value, "$", "$$"))
	}
	// The grpc address is the first "address" line, inside the [grpc] table.
	re := regexp.MustCompile(`(?m)^(\[grpc\]\n(?:\s+.*\n)*?\s*)address = .*$`)
	if !re.MatchString(out) {
		return "", fmt.Errorf("containerd default config has no [grpc] address")
	}
	out = re.ReplaceAllString(out, "${1}address = "+strings.ReplaceAll(quote(o.Address), "$", "$$"))
	return out, nil
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// KubeletOptions are the per-node settings of a kubelet.
type KubeletOptions struct {
	CgroupRoot      string
	ClientCAFile    string
	TLSCertFile     string
	TLSKeyFile      string
	RuntimeEndpoint string
	ClusterDNS      string
}

// Kubelet renders a KubeletConfiguration (JSON, which kubelet reads as YAML).
func Kubelet(o KubeletOptions) ([]byte, error) {
	cfg := KubeletMachineSettings(o.CgroupRoot)
	cfg["apiVersion"] = "kubelet.config.k8s.io/v1beta1"
	cfg["kind"] = "KubeletConfiguration"
	cfg["authentication"] = map[string]any{
		"anonymous": map[string]any{"enabled": false},
		"webhook":   map[string]any{"enabled": true},
		"x509":      map[string]any{"clientCAFile": o.ClientCAFile},
	}
	cfg["authorization"] = map[string]any{"mode": "Webhook"}
	cfg["containerRuntimeEndpoint"] = o.RuntimeEndpoint
	cfg["clusterDNS"] = []string{o.ClusterDNS}
	cfg["clusterDomain"] = "cluster.local"
	cfg["tlsCertFile"] = o.TLSCertFile
	cfg["tlsPrivateKeyFile"] = o.TLSKeyFile
	cfg["readOnlyPort"] = 0
	cfg["rotateCertificates"] = false
	return json.MarshalIndent(cfg, "", "  ")
}

// KubeletMachineSettings are the KubeletConfiguration fields a lab node
// needs because several nodes share one machine, whoever else configures the
// kubelet (the lab itself, or kubeadm through a patch): cgroupfs under a root
// of the node's own on this cgroup v1 host, no swap check, image garbage
// collection off (the images are preloaded, never pulled again), eviction
// only near a full disk, a health port on loopback, the volume plugin
// directory inside the node's /var/lib/kubelet.
func KubeletMachineSettings(cgroupRoot string) map[string]any {
	return map[string]any{
		"cgroupDriver":                "cgroupfs",
		"cgroupRoot":                  cgroupRoot,
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"healthzBindAddress":          "127.0.0.1",
		"healthzPort":                 10248,
		"serializeImagePulls":         false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
			"nodefs.inodesFree": "1%",
		},
		"protectKernelDefaults":     false,
		"nodeStatusReportFrequency": "1m",
		// Inside /var/lib/kubelet (per node) instead of /usr/libexec/kubernetes.
		"volumePluginDir": "/var/lib/kubelet/volumeplugins",
	}
}

// KubeProxy renders a KubeProxyConfiguration for one node.
func KubeProxy(kubeconfig, node, clusterCIDR, mode string) ([]byte, error) {
	if mode != "iptables" && mode != "nftables" {
		return nil, fmt.Errorf("proxy mode %q: want iptables or nftables", mode)
	}
	cfg := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig},
		"mode":               mode,
		"clusterCIDR":        clusterCIDR,
		"hostnameOverride":   node,
		"detectLocalMode":    "ClusterCIDR",
		"metricsBindAddress": "127.0.0.1:10249",
		"healthzBindAddress": healthzBind(clusterCIDR),
		// nf_conntrack_max is global and read-only inside a network namespace:
		// leave every conntrack setting as the kernel has it.
		"conntrack": map[string]any{
			"maxPerCore":            0,
			"min":                   0,
			"tcpEstablishedTimeout": "0s",
			"tcpCloseWaitTimeout":   "0s",
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// healthzBind is kube-proxy's health address: every IPv4 address, or every
// IPv6 one in an IPv6-only cluster (its only cluster CIDR is IPv6).
func healthzBind(clusterCIDR string) string {
	if !strings.Contains(clusterCIDR, ",") && strings.Contains(clusterCIDR, ":") {
		return "[::]:10256"
	}
	return "0.0.0.0:10256"
}

// BridgeCNI renders the reference bridge + host-local + portmap conflist for a node
// whose pods take addresses from its pod CIDRs, one range set and one default
// route per family.
func BridgeCNI(podCIDRs ...string) ([]byte, error) {
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, c := range podCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", c, err)
		}
		ranges = append(ranges, []map[string]string{{"subnet": p.String()}})
		dst := "0.0.0.0/0"
		if p.Addr().Is6() {
			dst = "::/0"
		}
		routes = append(routes, map[string]string{"dst": dst})
	}
	cfg := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "lab-bridge",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "cni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": ranges,
					"routes": routes,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}
