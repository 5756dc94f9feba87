package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/estuary-cni/estuary/internal/sysctl"
)

func TestJournalKeepsTheFirstValueOnly(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir, "/host")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.Before("/host", sysctl.Setting{Key: "net/ipv4/ip_forward", Value: "1"}, "0"))
	must(j.Before("/host", sysctl.Setting{Key: "net/ipv4/ip_forward", Value: "1"}, "1")) // a later write of ours
	must(j.Before("/pod", sysctl.Setting{Key: "net/ipv4/ip_forward", Value: "1"}, "0"))  // another namespace
	must(j.Before("/host", sysctl.Setting{Key: "net/ipv4/conf/estvx4/forwarding", Value: "1"}, "0"))
	must(j.Before("/host", sysctl.Setting{Key: "net/ipv4/neigh/est1234/proxy_delay", Value: "0"}, "80"))
	must(j.Before("/host", sysctl.Setting{Key: "net/ipv4/conf/eth0/proxy_arp", Value: "1"}, "0"))

	again, err := openJournal(dir, "/host")
	if err != nil {
		t.Fatal(err)
	}
	want := []journalSysctl{{Key: "net/ipv4/ip_forward", Value: "0"}, {Key: "net/ipv4/conf/eth0/proxy_arp", Value: "0"}}
	if got := again.rec.Sysctls; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("journaled sysctls = %v, want %v (the first value, host namespace, links estuary does not own)", got, want)
	}
}

func TestJournalRestoresReplacedAndRemovesCreatedFiles(t *testing.T) {
	state, bin := t.TempDir(), t.TempDir()
	j, err := openJournal(state, "")
	if err != nil {
		t.Fatal(err)
	}
	theirs, ours := filepath.Join(bin, "portmap"), filepath.Join(bin, "loopback")
	if err := os.WriteFile(theirs, []byte("the node's portmap"), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{theirs, ours} {
		if err := j.file(p); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("estuary's"), 0o755); err != nil { // #nosec G306 -- a plugin binary
			t.Fatal(err)
		}
		if err := j.file(p); err != nil { // journaled once: the second call keeps the first state
			t.Fatal(err)
		}
	}
	files, _, err := j.restore()
	if err != nil || files != 2 {
		t.Fatalf("restore = %d files, %v; want 2, nil", files, err)
	}
	b, err := os.ReadFile(theirs)
	if err != nil || string(b) != "the node's portmap" {
		t.Fatalf("portmap = %q, %v; want the node's back", b, err)
	}
	if fi, err := os.Stat(theirs); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("portmap mode = %v, %v; want 0750 back", fi.Mode(), err)
	}
	if _, err := os.Stat(ours); !os.IsNotExist(err) {
		t.Fatalf("loopback, which the daemon created, is still there: %v", err)
	}
}

func TestJournalRefusesACorruptFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, JournalName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openJournal(dir, ""); err == nil {
		t.Fatal("a corrupt journal was accepted")
	}
	j, err := openOrResetJournal(dir, "")
	if err != nil || len(j.rec.Files)+len(j.rec.Sysctls) != 0 {
		t.Fatalf("openOrResetJournal = %+v, %v; want a new, empty journal", j, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, JournalName+".corrupt")); err != nil || string(b) != "{not json" {
		t.Fatalf("the corrupt journal was not kept aside: %q, %v", b, err)
	}
}
