package daemon

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
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
		c.AddressTimeout != 30*time.Second || c.HostNetns != "/proc/self/ns/net" {
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
		{"no kube", func(c *Config) { c.Kube = nil }, "--kubeconfig:"},
		{"relative socket", func(c *Config) { c.SocketPath = "cni.sock" }, `--socket: "cni.sock" is not an absolute path`},
		{"long socket", func(c *Config) { c.SocketPath = "/" + strings.Repeat("s", 107) }, "--socket: "},
		{"relative state", func(c *Config) { c.StatePath = "state.db" }, "--state-db: "},
		{"relative bin dir", func(c *Config) { c.CNIBinDir = "bin" }, "--cni-bin-dir: "},
		{"relative conf dir", func(c *Config) { c.CNIConfDir = "net.d" }, "--cni-conf-dir: "},
		{"no source", func(c *Config) { c.CNIBinarySource = "" }, "--cni-binary-source: required"},
		{"short timeout", func(c *Config) { c.AddressTimeout = time.Millisecond }, "--address-timeout: 1ms is outside"},
		{"long timeout", func(c *Config) { c.AddressTimeout = time.Hour }, "--address-timeout: 1h0m0s is outside"},
		{"bad mtu", func(c *Config) { c.MTU = 100 }, "--mtu: 100"},
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
	if err := writeSysctls(ns, nodeSysctls); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := readIn(ns, "net/ipv4/ip_forward", &got); err != nil || got != "1" {
		t.Fatalf("ip_forward in %s = %q, %v", ns, got, err)
	}
	if sysctlList(nodeSysctls) != "net.ipv4.ip_forward=1" {
		t.Fatalf("sysctlList = %s", sysctlList(nodeSysctls))
	}
}

// readIn reads /proc/sys/key on a throw-away thread inside the namespace.
func readIn(nsPath, key string, out *string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromPath(nsPath)
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = h.Close() }()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		b, err := os.ReadFile(filepath.Join("/proc/sys", key))
		*out = strings.TrimSpace(string(b))
		errc <- err
	}()
	return <-errc
}
