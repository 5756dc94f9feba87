package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// TestUninstallRefusesWhileTheDaemonRuns: with a daemon answering on the
// socket, `estuary-daemon uninstall` changes nothing and says why.
func TestUninstallRefusesWhileTheDaemonRuns(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "cni.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	conf := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	conflist := filepath.Join(conf, daemon.ConflistName)
	if err := os.WriteFile(conflist, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := uninstallMain([]string{"--socket", sock, "--cni-conf-dir", conf, "--cni-bin-dir", dir,
		"--state-db", filepath.Join(dir, "lib", "state.db")}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "a daemon answers on "+sock) {
		t.Fatalf("uninstall with a running daemon = exit %d, %q; want 1 and the reason", code, errOut.String())
	}
	if _, err := os.Stat(conflist); err != nil {
		t.Fatalf("the refused uninstall removed the conflist: %v", err)
	}
}

func TestUninstallUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := uninstallMain([]string{"extra"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unexpected arguments") {
		t.Fatalf("uninstall extra = exit %d, %q; want 2", code, errOut.String())
	}
	if code := uninstallMain([]string{"--no-such-flag"}, &out, &errOut); code != 2 {
		t.Fatalf("uninstall --no-such-flag = exit %d, want 2", code)
	}
}
