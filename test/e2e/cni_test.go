//go:build lab

package e2e_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

const (
	cniNode     = "node-1"
	cniBinary   = "/opt/cni/bin/estuary"
	cniConflist = "/etc/cni/net.d/10-estuary.conflist"
)

// cniPlugin runs the installed estuary plugin on a node with the network
// configuration the runtime would pass it.
type cniPlugin struct {
	e    *labEnv
	node string
	conf map[string]any
}

// installedPlugin reads the node's conflist and builds the estuary plugin's
// configuration from it: its entry plus the list's cniVersion and name.
func (e *labEnv) installedPlugin(t *testing.T, node string) *cniPlugin {
	t.Helper()
	out, err := e.run(testCtx(t, time.Minute), node, "cat", cniConflist)
	if err != nil {
		t.Fatalf("read %s on %s: %v", cniConflist, node, err)
	}
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("parse %s on %s: %v", cniConflist, node, err)
	}
	for _, p := range list.Plugins {
		if p["type"] == "estuary" {
			conf := maps.Clone(p)
			conf["cniVersion"], conf["name"] = list.CNIVersion, list.Name
			return &cniPlugin{e: e, node: node, conf: conf}
		}
	}
	t.Fatalf("%s on %s has no plugin of type estuary: %s", cniConflist, node, out)
	return nil
}

// config is the plugin configuration with extra fields merged in.
func (c *cniPlugin) config(t *testing.T, extra map[string]any) string {
	t.Helper()
	conf := maps.Clone(c.conf)
	maps.Copy(conf, extra)
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// call runs the plugin with the CNI variables in vars and stdin.
func (c *cniPlugin) call(t *testing.T, vars map[string]string, stdin string) execResult {
	t.Helper()
	env := []string{"CNI_PATH=/opt/cni/bin"}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	r, err := c.e.exec(testCtx(t, 2*time.Minute), c.node, env, stdin, cniBinary)
	if err != nil {
		t.Fatalf("run %s on %s: %v", cniBinary, c.node, err)
	}
	return r
}

// wantError requires a non-zero exit and a CNI error on stdout whose
// message and details contain every part, with code (any code when 0).
func wantError(t *testing.T, what string, r execResult, code uint, parts ...string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("%s: exit 0, want a failure; stdout %q", what, r.stdout)
	}
	var cerr types.Error
	if err := json.Unmarshal([]byte(r.stdout), &cerr); err != nil || cerr.Msg == "" {
		t.Fatalf("%s: stdout %q is not a CNI error (stderr %q): %v", what, r.stdout, r.stderr, err)
	}
	text := cerr.Msg + " " + cerr.Details
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("%s: error %q does not name %q", what, text, p)
		}
	}
	if code != 0 && cerr.Code != code {
		t.Errorf("%s: error code %d (%s), want %d", what, cerr.Code, text, code)
	}
}

func wantSuccess(t *testing.T, what string, r execResult) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d, want 0; stdout %q, stderr %q", what, r.code, r.stdout, r.stderr)
	}
}

// kernelSnapshot is the node's link names, table 1000 and rules (ip fails on
// a table without routes; its answer is part of the snapshot).
func (c *cniPlugin) kernelSnapshot(t *testing.T) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	var parts []string
	for _, argv := range [][]string{{"ip", "-o", "link", "show"}, {"ip", "route", "show", "table", podTable}, {"ip", "rule", "show"}} {
		r, err := c.e.exec(ctx, c.node, nil, "", argv...)
		if err != nil {
			t.Fatal(err)
		}
		out := r.stdout
		if argv[1] == "-o" {
			out = linkNames(out)
		}
		parts = append(parts, fmt.Sprintf("%s (exit %d):\n%s%s", strings.Join(argv, " "), r.code, out, r.stderr))
	}
	return strings.Join(parts, "\n")
}

// linkNames keeps the "index: name:" part of `ip -o link show` (counters and
// states of unrelated links change on their own).
func linkNames(out string) string {
	var names []string
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			names = append(names, f[0]+" "+f[1])
		}
	}
	return strings.Join(names, "\n")
}

func unknownID() string { return fmt.Sprintf("e2e-unknown-%016x", rand.Uint64()) }

func podArgs(ns, name, uid string) string {
	return fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", ns, name, uid)
}

// TestCNIVerbsAgainstInstalledPlugin runs /opt/cni/bin/estuary on node-1 the
// way the runtime does: DEL of unknown containers succeeds (twice), a
// malformed configuration and a missing CNI_NETNS fail with CNI errors and
// change nothing, and CHECK passes for a running pod until its table 1000
// route is removed, then names the missing route.
func TestCNIVerbsAgainstInstalledPlugin(t *testing.T) {
	e := needLab(t)
	plugin := e.installedPlugin(t, cniNode)
	t.Run("DEL of an unknown container succeeds twice", func(t *testing.T) {
		vars := map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": unknownID(), "CNI_IFNAME": "eth0", "CNI_ARGS": podArgs("default", "e2e-nobody", "")}
		for i := 1; i <= 2; i++ {
			wantSuccess(t, fmt.Sprintf("DEL #%d of %s", i, vars["CNI_CONTAINERID"]), plugin.call(t, vars, plugin.config(t, nil)))
		}
	})
	t.Run("ADD with malformed configuration fails and changes nothing", func(t *testing.T) {
		before := plugin.kernelSnapshot(t)
		vars := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": unknownID(), "CNI_IFNAME": "eth0", "CNI_NETNS": "/var/run/netns/e2e-none"}
		wantError(t, "ADD with malformed JSON", plugin.call(t, vars, `{"cniVersion":`), types.ErrDecodingFailure, "network config")
		if after := plugin.kernelSnapshot(t); after != before {
			t.Errorf("a failed ADD changed %s:\nbefore:\n%s\nafter:\n%s", cniNode, before, after)
		}
	})
	t.Run("ADD without CNI_NETNS fails and changes nothing", func(t *testing.T) {
		before := plugin.kernelSnapshot(t)
		vars := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": unknownID(), "CNI_IFNAME": "eth0", "CNI_ARGS": podArgs("default", "e2e-nobody", "")}
		wantError(t, "ADD without CNI_NETNS", plugin.call(t, vars, plugin.config(t, nil)), types.ErrInvalidEnvironmentVariables, "CNI_NETNS")
		if after := plugin.kernelSnapshot(t); after != before {
			t.Errorf("a failed ADD changed %s:\nbefore:\n%s\nafter:\n%s", cniNode, before, after)
		}
	})
	t.Run("CHECK of a running pod passes, then names its removed route", func(t *testing.T) {
		checkRealPod(t, e, plugin)
	})
}

func checkRealPod(t *testing.T, e *labEnv, plugin *cniPlugin) {
	ns := e.newNamespace(t, "cni-check")
	e.mustCreate(t, ns, netexecPod("target", cniNode, nil))
	pod := e.waitPods(t, ns, "target")["target"]
	sb, err := e.sandboxOf(testCtx(t, time.Minute), &pod)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"CNI_COMMAND": "CHECK", "CNI_CONTAINERID": sb.ID, "CNI_NETNS": sb.NetNS, "CNI_IFNAME": "eth0",
		"CNI_ARGS": podArgs(ns, pod.Name, string(pod.UID)),
	}
	stdin := plugin.config(t, map[string]any{"prevResult": prevResult(plugin.conf["cniVersion"], sb.NetNS, pod.Status.PodIP)})
	wantSuccess(t, "CHECK of running pod "+pod.Name, plugin.call(t, vars, stdin))

	// The route goes and CHECK runs in one command, before a reconcile can
	// put the route back. A pass of the data-path loop that another event
	// on the node (a sandbox torn down) starts in between restores the
	// route first, and CHECK rightly passes: then the route is back, and
	// the pair runs again.
	const attempts = 5
	for i := 1; ; i++ {
		r, err := e.exec(testCtx(t, 2*time.Minute), cniNode, append(envList(vars), "CNI_PATH=/opt/cni/bin"), stdin,
			"sh", "-c", fmt.Sprintf("ip route del %s table %s && exec %s", pod.Status.PodIP, podTable, cniBinary))
		if err != nil {
			t.Fatal(err)
		}
		routes, _ := e.run(testCtx(t, time.Minute), cniNode, "ip", "route", "show", "table", podTable)
		t.Logf("table %s on %s after CHECK #%d:\n%s", podTable, cniNode, i, routes)
		if r.code != 0 || i == attempts {
			wantError(t, "CHECK after deleting the pod's route", r, 0, "route "+pod.Status.PodIP+"/32 table "+podTable, "missing")
			break
		}
		if !strings.Contains(routes, pod.Status.PodIP+" ") {
			t.Fatalf("CHECK #%d passed, and the route to %s is missing", i, pod.Status.PodIP)
		}
	}
	if err := e.c.Delete(testCtx(t, time.Minute), &pod); err != nil {
		t.Errorf("delete pod %s to repair its route: %v", pod.Name, err)
	}
	e.waitNoPods(t, ns, nil, 2*time.Minute)
}

func envList(vars map[string]string) []string {
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// prevResult is the result the runtime recorded for the pod's ADD.
func prevResult(version any, netns, ip string) map[string]any {
	return map[string]any{
		"cniVersion": version,
		"interfaces": []map[string]any{{"name": "eth0", "sandbox": netns}},
		"ips":        []map[string]any{{"interface": 0, "address": ip + "/32"}},
	}
}
