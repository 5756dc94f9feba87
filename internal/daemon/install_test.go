package daemon

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

func TestConflistContent(t *testing.T) {
	b, err := NewConflist("/run/estuary/cni.sock", 30*time.Second).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "cniVersion": "1.1.0",
  "name": "estuary",
  "plugins": [
    {
      "type": "estuary",
      "daemonSocket": "/run/estuary/cni.sock",
      "timeoutSeconds": 40
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      },
      "snat": true,
      "backend": "iptables"
    }
  ]
}
`
	if string(b) != want {
		t.Fatalf("conflist =\n%s\nwant\n%s", b, want)
	}
}

// conflistWithBandwidth is the conflist of the defaults with bandwidth
// chained.
const conflistWithBandwidth = `{
  "cniVersion": "1.1.0",
  "name": "estuary",
  "plugins": [
    {
      "type": "estuary",
      "daemonSocket": "/run/estuary/cni.sock",
      "timeoutSeconds": 40,
      "capabilities": {
        "bandwidth": true
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      },
      "snat": true,
      "backend": "iptables"
    },
    {
      "type": "bandwidth",
      "capabilities": {
        "bandwidth": true
      }
    }
  ]
}
`

func TestConflistWithBandwidthContent(t *testing.T) {
	b, err := NewConflist("/run/estuary/cni.sock", 30*time.Second).WithBandwidth().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := conflistWithBandwidth
	if string(b) != want {
		t.Fatalf("conflist =\n%s\nwant\n%s", b, want)
	}
}

// TestConflistForChainsBandwidth: auto chains the bandwidth plugin exactly
// when an extra plugin is named bandwidth, on always, off never; a chained
// plugin whose binary is not in the bin dir is an error naming it.
func TestConflistForChainsBandwidth(t *testing.T) {
	binDir := t.TempDir()
	base := Config{SocketPath: "/run/estuary/cni.sock", AddressTimeout: 30 * time.Second, CNIBinDir: binDir, CNIVersion: "1.0.0"}
	for _, c := range []struct {
		name   string
		mode   BandwidthMode
		extras []string
		want   bool
	}{
		{"auto, installed", BandwidthAuto, []string{"/plugins/portmap", "/plugins/bandwidth"}, true},
		{"auto, not installed", BandwidthAuto, []string{"/plugins/portmap"}, false},
		{"empty is auto", "", []string{"/plugins/bandwidth"}, true},
		{"on", BandwidthOn, nil, true},
		{"off", BandwidthOff, []string{"/plugins/bandwidth"}, false},
	} {
		cfg := base
		cfg.Bandwidth, cfg.CNIExtraPlugins = c.mode, c.extras
		_ = os.Remove(filepath.Join(binDir, BandwidthPluginType))
		if c.want {
			if _, err := conflistFor(cfg); err == nil || !strings.Contains(err.Error(), filepath.Join(binDir, "bandwidth")) {
				t.Errorf("%s: without the binary: %v, want an error naming %s/bandwidth", c.name, err, binDir)
			}
			writeFile(t, filepath.Join(binDir, BandwidthPluginType), "bw", 0o755)
		}
		list, err := conflistFor(cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if list.Chains(BandwidthPluginType) != c.want || list.CNIVersion != "1.0.0" {
			t.Errorf("%s: conflist %+v, want bandwidth chained %v and cniVersion 1.0.0", c.name, list, c.want)
		}
	}
}

func TestPluginTimeout(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want int
	}{{time.Second, 11}, {1500 * time.Millisecond, 12}, {30 * time.Second, 40}, {maxAddressTimeout, 600}, {time.Hour, 600}} {
		if got := pluginTimeout(c.in); got != c.want {
			t.Errorf("pluginTimeout(%s) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPluginConfig(t *testing.T) {
	c := NewConflist("/tmp/x.sock", 5*time.Second)
	b, err := c.PluginConfig(PluginType)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["cniVersion"] != "1.1.0" || got["name"] != "estuary" || got["type"] != "estuary" ||
		got["daemonSocket"] != "/tmp/x.sock" || got["timeoutSeconds"] != float64(15) || len(got) != 5 {
		t.Fatalf("plugin config = %s", b)
	}
	if _, err := c.PluginConfig("bridge"); err == nil || !strings.Contains(err.Error(), "no plugin of type bridge") {
		t.Fatalf("PluginConfig(bridge) error = %v", err)
	}
}

func TestInstallBinaryIdempotent(t *testing.T) {
	src := filepath.Join(t.TempDir(), "estuary-cni")
	writeFile(t, src, "v1", 0o600)
	dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
	dst := filepath.Join(dir, PluginType)

	mustInstall(t, src, dir, true)
	assertFile(t, dst, "v1", 0o755)
	before := stat(t, dst)

	mustInstall(t, src, dir, false)
	if after := stat(t, dst); !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("an identical binary was rewritten")
	}

	writeFile(t, src, "v2", 0o600)
	mustInstall(t, src, dir, true)
	assertFile(t, dst, "v2", 0o755)
	if os.SameFile(before, stat(t, dst)) {
		t.Fatal("a changed binary was written in place, not renamed over")
	}

	if err := os.Chmod(dst, 0o644); err != nil {
		t.Fatal(err)
	}
	mustInstall(t, src, dir, true)
	assertFile(t, dst, "v2", 0o755)
	assertOnly(t, dir, PluginType)
}

func TestInstallBinaryMissingSource(t *testing.T) {
	dir := t.TempDir()
	_, err := InstallBinary(filepath.Join(dir, "nope"), dir)
	if err == nil || !strings.Contains(err.Error(), "read CNI binary") {
		t.Fatalf("error = %v, want one naming the CNI binary", err)
	}
	assertOnly(t, dir)
}

func TestInstallConflistIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d")
	c := NewConflist("/run/estuary/cni.sock", 30*time.Second)
	for i, want := range []bool{true, false} {
		wrote, err := InstallConflist(dir, c)
		if err != nil || wrote != want {
			t.Fatalf("install %d: wrote %v, %v; want %v", i, wrote, err, want)
		}
	}
	b, _ := c.Marshal()
	assertFile(t, filepath.Join(dir, ConflistName), string(b), 0o644)

	c.Plugins[0].DaemonSocket = "/run/other.sock"
	if wrote, err := InstallConflist(dir, c); err != nil || !wrote {
		t.Fatalf("changed conflist: wrote %v, %v", wrote, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ConflistName))
	if err != nil || !strings.Contains(string(got), "/run/other.sock") {
		t.Fatalf("conflist after change = %s, %v", got, err)
	}
	assertOnly(t, dir, ConflistName)
}

func mustInstall(t *testing.T, src, dir string, wantWrote bool) {
	t.Helper()
	wrote, err := InstallBinary(src, dir)
	if err != nil || wrote != wantWrote {
		t.Fatalf("InstallBinary: wrote %v, %v; want wrote %v", wrote, err, wantWrote)
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func assertFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != content {
		t.Fatalf("%s = %q, %v; want %q", path, b, err, content)
	}
	if m := stat(t, path).Mode(); m != mode {
		t.Fatalf("%s mode = %v, want %v", path, m, mode)
	}
}

// assertOnly checks that dir holds exactly names: no temporary files left.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

func TestInstallPluginsByBaseNameIdempotent(t *testing.T) {
	srcDir := t.TempDir()
	loopback, portmap := filepath.Join(srcDir, "loopback"), filepath.Join(srcDir, "portmap")
	writeFile(t, loopback, "lo", 0o600)
	writeFile(t, portmap, "pm", 0o600)
	dir := filepath.Join(t.TempDir(), "bin")

	if n, err := InstallPlugins([]string{loopback, portmap}, dir); err != nil || n != 2 {
		t.Fatalf("first install wrote %d, err %v; want 2, nil", n, err)
	}
	assertFile(t, filepath.Join(dir, "loopback"), "lo", 0o755)
	assertFile(t, filepath.Join(dir, "portmap"), "pm", 0o755)
	if n, err := InstallPlugins([]string{loopback, portmap}, dir); err != nil || n != 0 {
		t.Fatalf("second install wrote %d, err %v; want 0, nil", n, err)
	}
	_, err := InstallPlugins([]string{filepath.Join(srcDir, "bandwidth")}, dir)
	if err == nil || !strings.Contains(err.Error(), "bandwidth") {
		t.Fatalf("error = %v, want one naming the missing plugin", err)
	}
	assertOnly(t, dir, "loopback", "portmap")
}

// TestInstallRTTablesNamesTablesForIP: the names file is written once
// (idempotent), and iproute2 reading it from rt_tables.d prints estuary's
// table names in `ip rule`.
func TestInstallRTTablesNamesTablesForIP(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rt_tables.d")
	for i, want := range []bool{true, false} {
		wrote, err := InstallRTTables(dir)
		if err != nil || wrote != want {
			t.Fatalf("install %d: wrote %v, %v; want %v", i, wrote, err, want)
		}
	}
	assertFile(t, filepath.Join(dir, RTTablesName), string(desired.RTTablesConf()), 0o644)
	assertOnly(t, dir, RTTablesName)

	if os.Geteuid() != 0 {
		t.Skip("reading the names with ip needs root (a mount and a network namespace)")
	}
	ns := nstest.New(t)
	if out, err := exec.Command("ip", "-n", filepath.Base(ns), "rule", "add", "pref", "1001", "lookup", "1001").CombinedOutput(); err != nil {
		t.Fatalf("ip rule add: %v\n%s", err, out)
	}
	// A private mount namespace shows the file where iproute2 looks,
	// without touching the machine's /etc.
	script := `mkdir -p /etc/iproute2/rt_tables.d && mount --bind "$1" /etc/iproute2/rt_tables.d && ip -n "$2" rule`
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", dir, filepath.Base(ns)).CombinedOutput()
	if err != nil {
		t.Fatalf("ip rule with the names: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "1001:\tfrom all lookup estuary-overlay") {
		t.Fatalf("ip rule does not name table 1001:\n%s", out)
	}
}

// TestConflistForPortmapBackend: portmap's backend is always named, so that
// it never probes for iptables per call: iptables unless nftables is asked for.
func TestConflistForPortmapBackend(t *testing.T) {
	base := Config{SocketPath: "/run/estuary/cni.sock", AddressTimeout: 30 * time.Second, CNIVersion: "1.1.0", Bandwidth: BandwidthOff}
	for _, c := range []struct {
		set  PortmapBackend
		want string
	}{{"", `"backend":"iptables"`}, {PortmapIPTables, `"backend":"iptables"`}, {PortmapNFTables, `"backend":"nftables"`}} {
		cfg := base
		cfg.PortmapBackend = c.set
		list, err := conflistFor(cfg)
		if err != nil {
			t.Fatalf("backend %q: %v", c.set, err)
		}
		b, err := list.PluginConfig(PortmapPluginType)
		if err != nil {
			t.Fatalf("backend %q: %v", c.set, err)
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("backend %q: portmap config %s, want %s", c.set, b, c.want)
		}
	}
}
