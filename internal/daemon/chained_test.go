package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const tuningEntry = `{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.accept_local":"1"}}`

// TestConflistWithChainedTuningContent: a chained plugin is listed after
// estuary, portmap and bandwidth, exactly as configured, and the runtime
// passes it its entry with the list's cniVersion and name.
func TestConflistWithChainedTuningContent(t *testing.T) {
	binDir := t.TempDir()
	for _, name := range []string{BandwidthPluginType, "tuning"} {
		writeFile(t, filepath.Join(binDir, name), name, 0o755)
	}
	chained, err := ParseChainedPlugins("[" + tuningEntry + "]")
	if err != nil {
		t.Fatal(err)
	}
	list, err := conflistFor(Config{SocketPath: "/run/estuary/cni.sock", AddressTimeout: 30 * time.Second, CNIBinDir: binDir,
		CNIVersion: "1.1.0", Bandwidth: BandwidthOn, CNIChainedPlugins: chained})
	if err != nil {
		t.Fatal(err)
	}
	b, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(conflistWithBandwidth, "\n  ]\n}\n") + `,
    {
      "type": "tuning",
      "sysctl": {
        "net.ipv4.conf.eth0.accept_local": "1"
      }
    }
  ]
}
`
	if string(b) != want {
		t.Fatalf("conflist =\n%s\nwant\n%s", b, want)
	}
	cfg, err := list.PluginConfig("tuning")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(cfg, &got); err != nil {
		t.Fatal(err)
	}
	sysctl, _ := got["sysctl"].(map[string]any)
	if got["cniVersion"] != "1.1.0" || got["name"] != "estuary" || got["type"] != "tuning" ||
		sysctl["net.ipv4.conf.eth0.accept_local"] != "1" || len(got) != 4 {
		t.Errorf("tuning's plugin config = %s", cfg)
	}
}

// TestConflistWithoutChainedPluginsUnchanged: no chained plugins, no change
// to the conflist.
func TestConflistWithoutChainedPluginsUnchanged(t *testing.T) {
	cfg := Config{SocketPath: "/run/estuary/cni.sock", AddressTimeout: 30 * time.Second, CNIVersion: "1.1.0", Bandwidth: BandwidthOff}
	list, err := conflistFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := list.Marshal()
	want, _ := NewConflist(cfg.SocketPath, cfg.AddressTimeout).Marshal()
	if string(got) != string(want) {
		t.Errorf("conflist =\n%s\nwant\n%s", got, want)
	}
}

// TestChainedPluginNeedsItsBinary: a chained plugin whose binary is not in
// the bin dir is an error naming the file and the entry.
func TestChainedPluginNeedsItsBinary(t *testing.T) {
	binDir := t.TempDir()
	chained, err := ParseChainedPlugins("[" + tuningEntry + "]")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{SocketPath: "/run/estuary/cni.sock", AddressTimeout: 30 * time.Second, CNIBinDir: binDir,
		CNIVersion: "1.1.0", Bandwidth: BandwidthOff, CNIChainedPlugins: chained}
	_, err = conflistFor(cfg)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(binDir, "tuning")) || !strings.Contains(err.Error(), "--cni-chained-plugins entry 0") {
		t.Fatalf("without the binary: %v, want an error naming %s and entry 0", err, filepath.Join(binDir, "tuning"))
	}
}

// TestParseChainedPluginsRefusesBadEntries: every bad entry is refused with
// an error naming the flag's entry and what is wrong with it; a good list
// parses to its entries.
func TestParseChainedPluginsRefusesBadEntries(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`{"type":"tuning"}`, []string{"not a JSON array"}},
		{`[{"sysctl":{}}]`, []string{`entry 0 {"sysctl":{}}`, `has no "type"`}},
		{`[{"type":"tuning"},{"type":7}]`, []string{`entry 1 {"type":7}`, `"type" 7 is not a string`}},
		{`[{"type":""}]`, []string{"entry 0", `"type" is empty`}},
		{`["tuning"]`, []string{`entry 0 "tuning"`, "is not a JSON object"}},
		{`[null]`, []string{"entry 0 null", "is not a JSON object"}},
		{`[{"type":"../../usr/bin/evil"}]`, []string{"entry 0", `"../../usr/bin/evil" is not a binary name`, "no path separators"}},
		{`[{"type":"a\\b"}]`, []string{"entry 0", "not a binary name"}},
		{`[{"type":".."}]`, []string{"entry 0", "not a binary name"}},
		{`[{"type":"estuary"}]`, []string{"entry 0", `"estuary" is already in the conflist`}},
		{`[{"type":"portmap"}]`, []string{"entry 0", `"portmap" is already in the conflist`, "hostPorts"}},
		{`[{"type":"tuning"},{"type":"bandwidth"}]`, []string{"entry 1", `"bandwidth" is already in the conflist`, "--cni-bandwidth"}},
	} {
		got, err := ParseChainedPlugins(c.in)
		if err == nil {
			t.Errorf("%s: parsed to %s, want an error", c.in, got)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.in, err, w)
			}
		}
	}
	for _, in := range []string{"", "  ", "[]"} {
		if got, err := ParseChainedPlugins(in); err != nil || len(got) != 0 {
			t.Errorf("%q: %s, %v; want no entries", in, got, err)
		}
	}
	got, err := ParseChainedPlugins(`[` + tuningEntry + `,{"type":"sbr"}]`)
	if err != nil || len(got) != 2 || string(got[0]) != tuningEntry || string(got[1]) != `{"type":"sbr"}` {
		t.Errorf("good list: %s, %v", got, err)
	}
}

// TestRunRefusesBadChainedPlugin: a configuration built without the flag
// is checked the same way, and the daemon refuses it before it writes
// anything on the node.
func TestRunRefusesBadChainedPlugin(t *testing.T) {
	cfg := validConfig()
	cfg.CNIBinDir, cfg.CNIConfDir = filepath.Join(t.TempDir(), "bin"), filepath.Join(t.TempDir(), "net.d")
	cfg.CNIChainedPlugins = []json.RawMessage{json.RawMessage(`{"type":"tuning/x"}`)}
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "--cni-chained-plugins: entry 0") || !strings.Contains(err.Error(), "invalid configuration") {
		t.Fatalf("Run = %v, want an invalid configuration naming --cni-chained-plugins entry 0", err)
	}
	for _, dir := range []string{cfg.CNIBinDir, cfg.CNIConfDir} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want nothing made", dir, err)
		}
	}
}
