package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	var lines []string
	for i := 0; i < 30; i++ {
		lines = append(lines, "line"+string(rune('a'+i%26)))
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(Tail(p, 3))
	if len(got) != 3 || got[2] != lines[29] {
		t.Errorf("Tail = %v", got)
	}
	if !strings.Contains(Tail(filepath.Join(t.TempDir(), "missing"), 3), "no log") {
		t.Error("missing log not reported")
	}
}

func TestAliveAndPIDFiles(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	if Alive(1 << 30) {
		t.Error("impossible pid alive")
	}
	if RSS(os.Getpid()) == 0 {
		t.Error("no RSS for this process")
	}
	p := filepath.Join(t.TempDir(), "x.pid")
	_ = os.WriteFile(p, []byte("1234\n"), 0o644)
	if ReadPID(p) != 1234 || ReadPID(p+".missing") != 0 {
		t.Error("ReadPID")
	}
}
