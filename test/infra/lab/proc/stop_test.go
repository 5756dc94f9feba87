package proc

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startSleep starts a child that runs until killed; the caller reaps it.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

// TestStopperWaitsUntilReaped: a killed child of this test exits at once but
// stays a zombie until this test reaps it; Wait does not count it gone before
// that, names it and its parent, and returns nil once it is reaped.
func TestStopperWaitsUntilReaped(t *testing.T) {
	cmd := startSleep(t)
	s := NewStopper()
	defer s.Close()
	s.Kill(cmd.Process.Pid)
	if s.Killed() != 1 {
		t.Fatalf("Killed() = %d, want 1", s.Killed())
	}
	err := s.Wait(time.Now().Add(300 * time.Millisecond))
	// The name is the command line, or the command's name when the kernel
	// has not published the command line yet.
	pid, parent := strconv.Itoa(cmd.Process.Pid), strconv.Itoa(os.Getpid())
	wants := []string{"process " + pid + " (sleep 60) ", "process " + pid + " (sleep) "}
	tail := "exited but its parent, process " + parent + ", has not reaped it"
	if err == nil || !strings.Contains(err.Error(), wants[0]+tail) && !strings.Contains(err.Error(), wants[1]+tail) {
		t.Fatalf("Wait before the reap: %v; want an error containing %q or %q", err, wants[0]+tail, wants[1]+tail)
	}
	_ = cmd.Wait() // reap it
	if err := s.Wait(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatalf("Wait after the reap: %v", err)
	}
}

// TestStopperKillCgroup: every process of a cgroup is killed and, once Wait
// returns, gone; the emptied cgroup can be removed.
func TestStopperKillCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	rel := "estproctest-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { _ = RemoveCgroup(rel, time.Now().Add(10*time.Second)) })
	var cmds []*exec.Cmd
	for range 3 {
		cmd := startSleep(t)
		if err := JoinCgroup(rel, cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		go func() { _ = cmd.Wait() }() // this test is their parent: reap them as init would
		cmds = append(cmds, cmd)
	}
	if got := CgroupPIDs(rel); len(got) != len(cmds) {
		t.Fatalf("cgroup %s holds %v, want the %d sleeps", rel, got, len(cmds))
	}
	s := NewStopper()
	defer s.Close()
	if err := s.KillCgroup(rel, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if _, err := os.Stat("/proc/" + strconv.Itoa(c.Process.Pid)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("process %d still in /proc after Wait (%v)", c.Process.Pid, err)
		}
	}
	if err := RemoveCgroup(rel, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if left := CgroupExists(rel); len(left) > 0 {
		t.Errorf("cgroup left: %v", left)
	}
}
