package daemon

// Chained plugins: the user's CNI plugins the conflist lists after
// estuary's own (estuary, portmap and, when chained, bandwidth), such as the
// reference tuning plugin for a pod's sysctls or a service mesh's CNI. Each
// is one plugin configuration object of the conflist, kept as written; the
// runtime's CNI library runs it with the previous plugin's result as
// prevResult, whose interfaces name the pod's interface (its sandbox is the
// pod's netns, and every address points at it).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// chainedFlag is the flag that sets Config.CNIChainedPlugins.
const chainedFlag = "--cni-chained-plugins"

// ownPluginTypes are the types estuary's conflist lists itself; a chained
// entry of one of them would run that plugin twice.
var ownPluginTypes = map[string]string{
	PluginType:          "estuary's own plugin",
	PortmapPluginType:   "chained by estuary for hostPorts",
	BandwidthPluginType: "chained by estuary for the bandwidth annotations (--cni-bandwidth)",
}

// ParseChainedPlugins reads the value of --cni-chained-plugins: a JSON array
// of plugin configuration objects, each with a "type". Empty is none. The
// entries are checked as Config.validate checks them, and an error names
// the entry.
func ParseChainedPlugins(v string) ([]json.RawMessage, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(v), &entries); err != nil {
		return nil, fmt.Errorf("not a JSON array of plugin configurations: %w", err)
	}
	if err := checkChainedPlugins(entries); err != nil {
		return nil, err
	}
	return entries, nil
}

// checkChainedPlugins checks every entry and reports each bad one.
func checkChainedPlugins(entries []json.RawMessage) error {
	var errs []error
	for i, e := range entries {
		if _, err := chainedType(e); err != nil {
			errs = append(errs, fmt.Errorf("entry %d %s: %w", i, abbreviate(e), err))
		}
	}
	return errors.Join(errs...)
}

// chainedType returns the type of a chained entry: a JSON object whose
// "type" is a binary name of the CNI bin dir other than estuary's own.
func chainedType(entry json.RawMessage) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(entry, &fields); err != nil || fields == nil {
		return "", errors.New("is not a JSON object")
	}
	raw, ok := fields["type"]
	if !ok {
		return "", errors.New(`has no "type"`)
	}
	var typ string
	if err := json.Unmarshal(raw, &typ); err != nil {
		return "", fmt.Errorf(`"type" %s is not a string`, raw)
	}
	switch {
	case typ == "":
		return "", errors.New(`"type" is empty`)
	case strings.ContainsAny(typ, `/\`) || typ == "." || typ == "..":
		return "", fmt.Errorf(`"type" %q is not a binary name in the CNI bin dir (no path separators)`, typ)
	case ownPluginTypes[typ] != "":
		return "", fmt.Errorf(`"type" %q is already in the conflist (%s)`, typ, ownPluginTypes[typ])
	}
	return typ, nil
}

// abbreviate shows an entry in an error: compact, at most 80 bytes.
func abbreviate(entry json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, entry) != nil {
		b.Reset()
		b.Write(entry)
	}
	s := b.String()
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// chainedPlugins returns the conflist entries of cfg's chained plugins,
// each of whose binary must be in the bin dir: without it every ADD would
// fail.
func chainedPlugins(cfg Config) ([]Plugin, error) {
	plugins := make([]Plugin, 0, len(cfg.CNIChainedPlugins))
	for i, e := range cfg.CNIChainedPlugins {
		typ, err := chainedType(e)
		if err != nil {
			return nil, fmt.Errorf("%s: entry %d %s: %w", chainedFlag, i, abbreviate(e), err)
		}
		if _, err := os.Stat(filepath.Join(cfg.CNIBinDir, typ)); err != nil {
			return nil, fmt.Errorf("chain plugin %q (%s entry %d): its binary: %w", typ, chainedFlag, i, err)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, e); err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", chainedFlag, i, err)
		}
		plugins = append(plugins, Plugin{Type: typ, Config: b.Bytes()})
	}
	return plugins, nil
}
