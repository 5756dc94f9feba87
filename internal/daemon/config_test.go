package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

func validConfig() Config {
	return Config{NodeName: "node-a", Kube: &rest.Config{}, CNIBinarySource: "/usr/local/bin/estuary-cni"}
}

func TestValidateDefaults(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	c := validConfig().withDefaults()
	if c.SocketPath != "/run/estuary/cni.sock" || c.StatePath != "/var/lib/estuary/state.db" ||
		c.CNIBinDir != "/opt/cni/bin" || c.CNIConfDir != "/etc/cni/net.d" ||
		c.AddressTimeout != 30*time.Second || c.HostNetns != "/proc/self/ns/net" || c.VXLANPort != 8472 || c.CNIVersion != "1.1.0" ||
		c.Bandwidth != BandwidthAuto {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no node", func(c *Config) { c.NodeName = "" }, "--node-name: required"},
		{"relative plugin", func(c *Config) { c.CNIExtraPlugins = []string{"portmap"} }, `--cni-extra-plugins: "portmap" is not an absolute path`},
		{"port", func(c *Config) { c.VXLANPort = 70000 }, "--vxlan-port: 70000 is outside 1..65535"},
		{"uplink", func(c *Config) { c.UnderlayUplink = "a-very-long-link-name" }, `--underlay-uplink: "a-very-long-link-name" is not a link name`},
		{"cni version", func(c *Config) { c.CNIVersion = "0.4.0" }, `--cni-version: "0.4.0" is neither 1.0.0 nor 1.1.0`},
		{"bandwidth", func(c *Config) { c.Bandwidth = "yes" }, `--cni-bandwidth: "yes" is none of auto, on, off`},
		{"portmap backend", func(c *Config) { c.PortmapBackend = "ipvs" }, `--cni-portmap-backend: "ipvs" is neither iptables nor nftables`},
		{"two parents", func(c *Config) { c.VXLANParent, c.VXLANParentRegex = "eth0", "eth.*" }, "set at most one"},
		{"bad regex", func(c *Config) { c.VXLANParentRegex = "eth[" }, "--vxlan-parent-regex: error parsing regexp"},
		{"no kube", func(c *Config) { c.Kube = nil }, "--kubeconfig:"},
		{"relative socket", func(c *Config) { c.SocketPath = "cni.sock" }, `--socket: "cni.sock" is not an absolute path`},
		{"long socket", func(c *Config) { c.SocketPath = "/" + strings.Repeat("s", 107) }, "--socket: "},
		{"relative state", func(c *Config) { c.StatePath = "state.db" }, "--state-db: "},
		{"relative bin dir", func(c *Config) { c.CNIBinDir = "bin" }, "--cni-bin-dir: "},
		{"relative conf dir", func(c *Config) { c.CNIConfDir = "net.d" }, "--cni-conf-dir: "},
		{"relative rt tables dir", func(c *Config) { c.RTTablesDir = "rt" }, `--rt-tables-dir: "rt" is not an absolute path`},
		{"no source", func(c *Config) { c.CNIBinarySource = "" }, "--cni-binary-source: required"},
		{"short timeout", func(c *Config) { c.AddressTimeout = time.Millisecond }, "--address-timeout: 1ms is outside"},
		{"long timeout", func(c *Config) { c.AddressTimeout = time.Hour }, "--address-timeout: 1h0m0s is outside"},
		{"bad mtu", func(c *Config) { c.MTU = 100 }, "--mtu: 100"},
		{"metrics address", func(c *Config) { c.MetricsAddr = "9783" }, "--metrics-bind-address: address 9783: missing port"},
		{"pod to node", func(c *Config) { c.PodToNodeTraffic = "deny" }, `--pod-to-node-traffic: "deny" is neither allow nor policy`},
		{"vlan uplinks", func(c *Config) { c.VLANUplinks = []string{"bond0", ""} }, "--vlan-uplinks: entry 2: empty link name"},
		{"bgp uplinks", func(c *Config) { c.BGPUplinks = []string{"ens5f0/1"} }, `--bgp-uplinks: entry 1: link name "ens5f0/1" holds a slash`},
		{"vxlan parents", func(c *Config) { c.VXLANParents = []string{"abcdefghijklmnop"} }, `--vxlan-parents: entry 1: link name "abcdefghijklmnop" is 16 bytes`},
		{"parents and regex", func(c *Config) { c.VXLANParents, c.VXLANParentRegex = []string{"eth0"}, "eth.*" }, "--vxlan-parents and --vxlan-parent-regex: set at most one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{SocketPath: "x"}.Validate()
	for _, flag := range []string{"--node-name", "--kubeconfig", "--socket", "--cni-binary-source"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate = %v, want %s named", err, flag)
		}
	}
}

func TestRunRefusesInvalidConfig(t *testing.T) {
	err := Run(context.Background(), Config{})
	if err == nil || !strings.Contains(err.Error(), "invalid configuration") {
		t.Fatalf("Run = %v, want invalid configuration", err)
	}
}

func TestWriteSysctlsInOtherNamespace(t *testing.T) {
	ns := nstest.New(t)
	if err := sysctl.Write(ns, nodeSysctls); err != nil {
		t.Fatal(err)
	}
	if got, err := sysctl.Read(ns, "net/ipv4/ip_forward"); err != nil || got != "1" {
		t.Fatalf("ip_forward in %s = %q, %v", ns, got, err)
	}
	if sysctl.List(nodeSysctls) != "net.ipv4.ip_forward=1" {
		t.Fatalf("sysctl.List = %s", sysctl.List(nodeSysctls))
	}
}
