package chart

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// TestDaemonChainedPlugins: daemon.cniChainedPlugins becomes the daemon's
// --cni-chained-plugins, one JSON argument the daemon parses back to the
// entries given (characters YAML or JSON treat specially included); empty,
// the flag is left out; the tuning plugin is installed by default so it can
// be chained.
func TestDaemonChainedPlugins(t *testing.T) {
	daemonArgs := func(args ...string) []string {
		var ds appsv1.DaemonSet
		convert(t, find(t, render(t, args...), "DaemonSet", "estuary-daemon"), &ds)
		return ds.Spec.Template.Spec.Containers[0].Args
	}
	chained := func(args []string) (string, bool) {
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--cni-chained-plugins=") })
		if i < 0 {
			return "", false
		}
		return strings.TrimPrefix(args[i], "--cni-chained-plugins="), true
	}
	args := daemonArgs()
	if v, ok := chained(args); ok {
		t.Errorf("default: --cni-chained-plugins=%s, want the flag left out", v)
	}
	if !slices.ContainsFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--cni-extra-plugins=") && slices.Contains(strings.Split(strings.TrimPrefix(a, "--cni-extra-plugins="), ","), "/plugins/tuning")
	}) {
		t.Errorf("default: args %v, want /plugins/tuning installed", args)
	}

	const value = `[{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.accept_local":"1"}},{"type":"x-mesh","note":"a: 'b' \"c\" <d> & {e}"}]`
	v, ok := chained(daemonArgs("--set-json", "daemon.cniChainedPlugins="+value))
	if !ok {
		t.Fatal("--cni-chained-plugins missing")
	}
	entries, err := daemon.ParseChainedPlugins(v)
	if err != nil {
		t.Fatalf("the daemon refuses the chart's --cni-chained-plugins=%s: %v", v, err)
	}
	var want []any
	if err := json.Unmarshal([]byte(value), &want); err != nil {
		t.Fatal(err)
	}
	got := make([]any, 0, len(entries))
	for _, e := range entries {
		var x any
		if err := json.Unmarshal(e, &x); err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if gb, wb := mustJSON(t, got), mustJSON(t, want); gb != wb {
		t.Errorf("the daemon reads %s, want %s", gb, wb)
	}
}

// TestDaemonChainedPluginsRefused: an entry without a type, with a type of
// estuary's own plugins or a path, fails the render naming the entry.
func TestDaemonChainedPluginsRefused(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{`[{"sysctl":{}}]`, "/daemon/cniChainedPlugins/0"},
		{`[{"type":"tuning"},{"type":"portmap"}]`, "/daemon/cniChainedPlugins/1/type"},
		{`[{"type":"estuary"}]`, "/daemon/cniChainedPlugins/0/type"},
		{`[{"type":"bandwidth"}]`, "/daemon/cniChainedPlugins/0/type"},
		{`[{"type":"../../bin/sh"}]`, "/daemon/cniChainedPlugins/0/type"},
		{`[{"type":""}]`, "/daemon/cniChainedPlugins/0/type"},
		{`[{"type":7}]`, "/daemon/cniChainedPlugins/0/type"},
		{`["tuning"]`, "/daemon/cniChainedPlugins/0"},
	} {
		_, err := renderErr(t, "--set-json", "daemon.cniChainedPlugins="+c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a schema error at %s", c.value, err, c.want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
