package render

import (
	"encoding/json"
	"strings"
	"testing"
)

const defaultConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[debug]
  address = ""

[grpc]
  gid = 0
  address = "/run/containerd/containerd.sock"
  uid = 0

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    restrict_oom_score_adj = false
    sandbox_image = "registry.k8s.io/pause:3.6"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/opt/cni/bin"
      conf_dir = "/etc/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""
  [plugins."io.containerd.snapshotter.v1.btrfs"]
    root_path = ""
[ttrpc]
  address = ""
`

func TestContainerdEdits(t *testing.T) {
	out, err := Containerd(defaultConfig, ContainerdOptions{
		SandboxImage: "lab/pause:x", Root: "/r", State: "/s", Address: "/s/c.sock", CNIBinDir: "/b", CNIConfDir: "/c",
		RegistryConfigPath: "/lab/registry/hosts.d",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nroot = \"/r\"", "\nstate = \"/s\"", "restrict_oom_score_adj = true", `sandbox_image = "lab/pause:x"`,
		`bin_dir = "/b"`, `conf_dir = "/c"`, `config_path = "/lab/registry/hosts.d"`, "[grpc]\n  gid = 0\n  address = \"/s/c.sock\"",
		"[debug]\n  address = \"\"", "[ttrpc]\n  address = \"\"", `root_path = ""`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, out)
		}
	}
}

func TestContainerdMissingSetting(t *testing.T) {
	if _, err := Containerd("version = 2\n", ContainerdOptions{}); err == nil {
		t.Fatal("want an error for a config without the settings")
	}
}

func TestKubeletConfig(t *testing.T) {
	b, err := Kubelet(KubeletOptions{CgroupRoot: "/estlab/node-1", ClusterDNS: "10.79.0.10"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["failCgroupV1"] != false || m["cgroupDriver"] != "cgroupfs" || m["cgroupRoot"] != "/estlab/node-1" {
		t.Errorf("kubelet config: %s", b)
	}
}

func TestKubeProxyModes(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		b, err := KubeProxy("/k", "node-1", "10.78.0.0/16", mode)
		if err != nil || !strings.Contains(string(b), `"mode": "`+mode+`"`) {
			t.Errorf("mode %s: %v %s", mode, err, b)
		}
	}
	if _, err := KubeProxy("/k", "node-1", "10.78.0.0/16", "ipvs"); err == nil {
		t.Error("ipvs accepted")
	}
}

func TestBridgeCNI(t *testing.T) {
	b, err := BridgeCNI("10.78.2.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Plugins []struct {
			Type string
			IPAM struct {
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Plugins) != 2 || c.Plugins[0].Type != "bridge" || c.Plugins[1].Type != "portmap" ||
		c.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.78.2.0/24" {
		t.Errorf("conflist: %s", b)
	}
}

func TestBirdPeers(t *testing.T) {
	s := BirdPeers(64512, []BirdPeer{{Name: "node-1", Address: "10.77.0.11", ASN: 64600}, {Name: "node-2", Address: "10.77.0.12", ASN: 64600}})
	for _, want := range []string{
		"protocol bgp node_1 from lab_peer { neighbor 10.77.0.11 as 64600; }",
		"protocol bgp node_2 from lab_peer { neighbor 10.77.0.12 as 64600; }",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("peers file lacks %q:\n%s", want, s)
		}
	}
}

func TestBird(t *testing.T) {
	s := Bird(BirdOptions{RouterID: "10.77.0.1", ASN: 64512, PeersFile: "/x/peers.conf"})
	for _, want := range []string{"router id 10.77.0.1;", "local as 64512;", `include "/x/peers.conf";`, "protocol kernel"} {
		if !strings.Contains(s, want) {
			t.Errorf("bird.conf lacks %q:\n%s", want, s)
		}
	}
}

func TestBridgeCNIDualStack(t *testing.T) {
	b, err := BridgeCNI("10.78.2.0/24", "fd78:0:0:2::/64")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Plugins []struct {
			IPAM struct {
				Ranges [][]struct{ Subnet string }
				Routes []struct{ Dst string }
			}
		}
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	ipam := c.Plugins[0].IPAM
	if len(ipam.Ranges) != 2 || ipam.Ranges[1][0].Subnet != "fd78:0:0:2::/64" || len(ipam.Routes) != 2 || ipam.Routes[1].Dst != "::/0" {
		t.Errorf("dual-stack conflist: %s", b)
	}
	if _, err := BridgeCNI("10.78.2.0/33"); err == nil {
		t.Error("a bad pod CIDR was accepted")
	}
}

func TestBirdCarriesBothFamilies(t *testing.T) {
	s := Bird(BirdOptions{RouterID: "10.77.0.1", ASN: 64512, PeersFile: "/x/peers.conf"})
	for _, want := range []string{"ipv4 { import all; export none; };", "ipv6 { import all; export none; };", "protocol kernel {\n  ipv6 {"} {
		if !strings.Contains(s, want) {
			t.Errorf("bird.conf lacks %q:\n%s", want, s)
		}
	}
}

func TestKubeProxyHealthzFamily(t *testing.T) {
	for cidr, want := range map[string]string{"10.78.0.0/16": "0.0.0.0:10256", "10.78.0.0/16,fd78::/48": "0.0.0.0:10256", "fd78::/48": "[::]:10256"} {
		b, err := KubeProxy("/k", "node-1", cidr, "iptables")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"healthzBindAddress": "`+want+`"`) {
			t.Errorf("cluster CIDR %s: healthz not %s:\n%s", cidr, want, b)
		}
	}
}
