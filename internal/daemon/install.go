package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

const (
	// PluginType is the estuary plugin's type in the conflist and its
	// binary's name in the CNI bin dir (docs/cni.md).
	PluginType = "estuary"
	// ConflistName is the file written into the CNI conf dir.
	ConflistName = "10-estuary.conflist"
	// NetworkName is the conflist's network name.
	NetworkName = "estuary"
	// CNIVersion is the conflist's cniVersion.
	CNIVersion = "1.1.0"
	// RTTablesName is the iproute2 names file written into the rt tables
	// dir (desired.RTTablesConf).
	RTTablesName = "estuary.conf"
	// BandwidthPluginType is the reference bandwidth plugin's type in the
	// conflist and its binary's name in the CNI bin dir.
	BandwidthPluginType = "bandwidth"
	// PortmapPluginType is the reference portmap plugin's type, chained
	// after estuary for hostPorts.
	PortmapPluginType = "portmap"
	// BandwidthCapability is the capability through which the runtime
	// passes a pod's kubernetes.io/ingress-bandwidth and
	// kubernetes.io/egress-bandwidth annotations as runtimeConfig.bandwidth.
	BandwidthCapability = "bandwidth"

	// callMargin is added to the address timeout to give the plugin's
	// deadline (timeoutSeconds), so that an ADD that waited in vain fails
	// with the daemon's error naming the pod rather than a bare timeout.
	callMargin = 10 * time.Second
	// maxPluginTimeout is the largest timeoutSeconds the plugin accepts.
	maxPluginTimeout  = 600 * time.Second
	maxAddressTimeout = maxPluginTimeout - callMargin
)

// Conflist is the network configuration list the daemon installs.
type Conflist struct {
	CNIVersion string   `json:"cniVersion"`
	Name       string   `json:"name"`
	Plugins    []Plugin `json:"plugins"`
}

// Plugin is one entry of a Conflist; the fields not used by a type are
// omitted.
type Plugin struct {
	Type           string          `json:"type"`
	DaemonSocket   string          `json:"daemonSocket,omitempty"`
	TimeoutSeconds int             `json:"timeoutSeconds,omitempty"`
	Capabilities   map[string]bool `json:"capabilities,omitempty"`
	SNAT           *bool           `json:"snat,omitempty"`
	Backend        PortmapBackend  `json:"backend,omitempty"`
	// Config, when set, is the whole entry as the user wrote it (a chained
	// plugin, see chained.go); it is written as is and the fields above
	// other than Type are unused.
	Config json.RawMessage `json:"-"`
}

// MarshalJSON writes Config when set, else the typed fields.
func (p Plugin) MarshalJSON() ([]byte, error) {
	if p.Config != nil {
		return p.Config, nil
	}
	type fields Plugin
	return json.Marshal(fields(p))
}

// NewConflist returns the conflist for a daemon on socket whose ADDs wait
// at most addressTimeout for a pod's addresses: estuary, then portmap for
// hostPorts, with the iptables backend named (see WithPortmapBackend). The
// runtime brings up the pod's lo itself (containerd's and CRI-O's CRI do),
// so no loopback plugin is listed.
func NewConflist(socket string, addressTimeout time.Duration) Conflist {
	snat := true
	return Conflist{
		CNIVersion: CNIVersion,
		Name:       NetworkName,
		Plugins: []Plugin{
			{Type: PluginType, DaemonSocket: socket, TimeoutSeconds: pluginTimeout(addressTimeout)},
			{Type: PortmapPluginType, Capabilities: map[string]bool{"portMappings": true}, SNAT: &snat, Backend: PortmapIPTables},
		},
	}
}

// WithPortmapBackend returns c with portmap's backend set to b. portmap
// without a backend probes for iptables on every call, ADD and DEL alike,
// by running the iptables binary twice; named, it runs nothing for a pod
// without hostPorts.
func (c Conflist) WithPortmapBackend(b PortmapBackend) Conflist {
	plugins := slices.Clone(c.Plugins)
	for i := range plugins {
		if plugins[i].Type == PortmapPluginType {
			plugins[i].Backend = b
		}
	}
	c.Plugins = plugins
	return c
}

// WithBandwidth returns c with the reference bandwidth plugin chained last,
// with the bandwidth capability, so that a pod's bandwidth annotations
// become traffic shaping on its host veth. estuary's own entry takes the
// capability too: the daemon then records which pods are shaped and keeps
// the fast path, which would bypass the shaping, off their veths.
func (c Conflist) WithBandwidth() Conflist {
	plugins := make([]Plugin, 0, len(c.Plugins)+1)
	for _, p := range c.Plugins {
		if p.Type == PluginType {
			p.Capabilities = map[string]bool{BandwidthCapability: true}
		}
		plugins = append(plugins, p)
	}
	c.Plugins = append(plugins, Plugin{Type: BandwidthPluginType, Capabilities: map[string]bool{BandwidthCapability: true}})
	return c
}

// Chains reports whether c lists a plugin of type pluginType.
func (c Conflist) Chains(pluginType string) bool {
	return slices.ContainsFunc(c.Plugins, func(p Plugin) bool { return p.Type == pluginType })
}

// pluginTimeout is addressTimeout plus callMargin in whole seconds, capped
// at what the plugin accepts.
func pluginTimeout(addressTimeout time.Duration) int {
	d := min(addressTimeout+callMargin, maxPluginTimeout)
	return int(math.Ceil(d.Seconds()))
}

// Marshal renders the conflist as indented JSON with a final newline.
func (c Conflist) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode conflist: %w", err)
	}
	return append(b, '\n'), nil
}

// PluginConfig returns the plugin's network configuration as the runtime
// passes it on stdin: the list's cniVersion and name merged into the
// plugin's entry.
func (c Conflist) PluginConfig(pluginType string) ([]byte, error) {
	for _, p := range c.Plugins {
		if p.Type != pluginType {
			continue
		}
		b, err := pluginConfig(c.CNIVersion, c.Name, p)
		if err != nil {
			return nil, fmt.Errorf("encode %s plugin config: %w", pluginType, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("conflist %s has no plugin of type %s", c.Name, pluginType)
}

// pluginConfig is p's entry with the list's cniVersion and name set.
func pluginConfig(version, name string, p Plugin) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	fields["cniVersion"], fields["name"] = version, name
	return json.Marshal(fields)
}

// conflistFor is the conflist cfg asks for: estuary's own plugins, then the
// user's chained ones (chained.go). One that chains the bandwidth plugin,
// or a chained plugin, needs its binary in the bin dir: without it every
// ADD would fail.
func conflistFor(cfg Config) (Conflist, error) {
	list := NewConflist(cfg.SocketPath, cfg.AddressTimeout)
	list.CNIVersion = cfg.CNIVersion
	if cfg.PortmapBackend != "" {
		list = list.WithPortmapBackend(cfg.PortmapBackend)
	}
	if cfg.chainsBandwidth() {
		bin := filepath.Join(cfg.CNIBinDir, BandwidthPluginType)
		if _, err := os.Stat(bin); err != nil {
			return Conflist{}, fmt.Errorf("chain the bandwidth plugin (--cni-bandwidth=%s): %w", cfg.Bandwidth, err)
		}
		list = list.WithBandwidth()
	}
	chained, err := chainedPlugins(cfg)
	if err != nil {
		return Conflist{}, err
	}
	list.Plugins = append(list.Plugins, chained...)
	return list, nil
}

// InstallConflist writes c as dir/ConflistName, atomically, unless the file
// already holds exactly that. It reports whether it wrote.
func InstallConflist(dir string, c Conflist) (bool, error) {
	b, err := c.Marshal()
	if err != nil {
		return false, err
	}
	return writeAtomic(filepath.Join(dir, ConflistName), b, 0o644)
}

// InstallRTTables writes the routing plan's table names as dir/RTTablesName,
// atomically, unless the file already holds exactly them, so `ip rule` on
// the node names estuary's tables. It reports whether it wrote.
func InstallRTTables(dir string) (bool, error) {
	return writeAtomic(filepath.Join(dir, RTTablesName), desired.RTTablesConf(), 0o644)
}

// InstallBinary copies the binary src to dir/PluginType, atomically, unless
// the file there is already identical. It reports whether it wrote.
func InstallBinary(src, dir string) (bool, error) {
	b, err := os.ReadFile(src) // #nosec G304 -- operator-configured binary
	if err != nil {
		return false, fmt.Errorf("read CNI binary: %w", err)
	}
	return writeAtomic(filepath.Join(dir, PluginType), b, 0o755)
}

// InstallPlugins copies each binary in srcs to dir under its base name (the
// reference plugins the conflist chains, e.g. portmap), atomically, skipping
// those already identical. It reports how many it wrote.
func InstallPlugins(srcs []string, dir string) (int, error) {
	wrote := 0
	for _, src := range srcs {
		b, err := os.ReadFile(src) // #nosec G304 -- operator-configured binary
		if err != nil {
			return wrote, fmt.Errorf("read plugin %s: %w", src, err)
		}
		w, err := writeAtomic(filepath.Join(dir, filepath.Base(src)), b, 0o755)
		if err != nil {
			return wrote, fmt.Errorf("install plugin %s: %w", src, err)
		}
		if w {
			wrote++
		}
	}
	return wrote, nil
}

// writeAtomic makes path hold data with mode: skipped when it already does,
// else written to a temporary file in the same directory, synced and renamed
// over path, so a reader (the runtime executing the plugin, or loading the
// conflist) never sees a partial file.
func writeAtomic(path string, data []byte, mode fs.FileMode) (bool, error) {
	if same(path, data, mode) {
		return false, nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil { // #nosec G301 -- CNI dirs are world-readable
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("install %s: %w", path, err)
	}
	err = fill(tmp, data, mode)
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return false, fmt.Errorf("install %s: %w", path, err)
	}
	return true, nil
}

// fill writes, chmods, syncs and closes f.
func fill(f *os.File, data []byte, mode fs.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// same reports whether path is a regular file holding data with mode.
func same(path string, data []byte, mode fs.FileMode) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != mode || fi.Size() != int64(len(data)) {
		return false
	}
	cur, err := os.ReadFile(path) // #nosec G304 -- our own install target
	return err == nil && bytes.Equal(cur, data)
}
