package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/nodereport"
)

// TestNodeStateMainAddsTheDaemonsParts runs `estuary-daemon node-state -o
// json` against a daemon's health server with two endpoints and no BGP
// network: the report names the node and adds the endpoint store, the BGP
// section, the conflist's content and the absent journal to the kernel's
// sections.
func TestNodeStateMainAddsTheDaemonsParts(t *testing.T) {
	srv := endpointsServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConflistName), []byte(`{"cniVersion":"1.1.0","name":"estuary"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := NodeStateMain([]string{"-o", "json", "--node-name", "node-a", "--health-address", strings.TrimPrefix(srv.URL, "http://"),
		"--cni-conf-dir", dir, "--state-db", filepath.Join(dir, "lib", "state.db")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("node-state = exit %d: %s", code, errOut.String())
	}
	var r nodereport.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("node-state -o json printed %q: %v", out.String(), err)
	}
	if r.Node != "node-a" || !strings.HasPrefix(r.Version, "estuary-daemon ") {
		t.Errorf("report of node %q by %q", r.Node, r.Version)
	}
	for name, want := range map[string]string{
		"links":     "lo ",
		"endpoints": "a/web uid u1 container c1 if eth0 network overlay ips 10.0.0.2/32,fd00::2/128 created 2026-11-24T12:00:00Z",
		"bgp":       "no BGP speaker on this node",
		"file " + filepath.Join(dir, ConflistName):       `"name":"estuary"`,
		"file " + filepath.Join(dir, "lib", JournalName): "(absent)",
	} {
		s, ok := r.Section(name)
		if !ok || s.Error != "" || !strings.Contains(strings.Join(s.Lines, "\n"), want) {
			t.Errorf("section %s = %+v (present %t), want a line with %q", name, s, ok, want)
		}
	}
	if s, _ := r.Section("endpoints"); len(s.Lines) != 2 || !strings.HasSuffix(s.Lines[1], " recovered") {
		t.Errorf("endpoints section = %q, want both endpoints, the second recovered", s.Lines)
	}
}

// A missing conflist is an error of its section only; the text output
// still carries every other section.
func TestNodeStateMainReportsAMissingConflist(t *testing.T) {
	srv := endpointsServer(t)
	var out, errOut bytes.Buffer
	code := NodeStateMain([]string{"--health-address", strings.TrimPrefix(srv.URL, "http://"), "--cni-conf-dir", t.TempDir()}, &out, &errOut)
	if code != 0 {
		t.Fatalf("node-state = exit %d: %s", code, errOut.String())
	}
	text := out.String()
	for _, w := range []string{"== links (", "== endpoints (2)", "10-estuary.conflist (0)\n   ERROR: open "} {
		if !strings.Contains(text, w) {
			t.Errorf("text output has no %q:\n%s", w, text)
		}
	}
}

func TestNodeStateMainUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{"extra"}, {"-o", "yaml"}, {"--no-such-flag"}} {
		if code := NodeStateMain(args, &out, &errOut); code != 2 {
			t.Errorf("node-state %q = exit %d, want 2", args, code)
		}
	}
}

// bgpLines renders /bgp's JSON indented, and says so when the daemon runs
// no BGP speaker (404).
func TestBGPLines(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"networks":{"bgp-net":[{"Address":"10.77.100.1","ASN":64512,"State":"Established"}]}}`))
	}))
	defer srv.Close()
	lines, err := bgpLines(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(lines, "\n"); !strings.Contains(all, `"State": "Established"`) || len(lines) < 5 {
		t.Errorf("bgp lines = %q", lines)
	}
	none := httptest.NewServer(http.NotFoundHandler())
	defer none.Close()
	if lines, err := bgpLines(context.Background(), strings.TrimPrefix(none.URL, "http://")); err != nil || lines[0] != "no BGP speaker on this node" {
		t.Errorf("bgp lines without a speaker = %q, %v", lines, err)
	}
}
