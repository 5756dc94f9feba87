// Package proc owns the lab's long-running processes: starting them detached from
// the calling command (their own session, their own log file), inside a lab cgroup,
// a network namespace and optionally a node's mount namespace; waiting for them to
// become ready; and reporting the tail of their log when they do not.
//
// Design: every process is started through the lab binary itself (`estuary-lab
// _run ...`, see RunMain), which first moves itself into the lab cgroup in every
// hierarchy, then enters the namespaces, then execs the real program. So every
// descendant (containerd shims, pod processes under kubelet's cgroupRoot) lives
// below the lab's cgroup, and cleanup can find and kill all of them by cgroup even
// when the state file is lost.
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RunCommand is the hidden subcommand of the lab binary that RunMain implements.
const RunCommand = "_run"

// Spec describes one detached process.
type Spec struct {
	Name       string   // component name: log file <LogDir>/<Name>.log, pid file <RunDir>/<Name>.pid
	Argv       []string // program and arguments
	Env        []string // extra environment
	Dir        string   // working directory
	Cgroup     string   // cgroup path relative to each hierarchy root
	NetNS      string   // network namespace path to enter ("" = stay)
	JoinPID    int      // enter the mount, network and UTS namespaces of this process
	NewMountNS bool     // start in a new mount and UTS namespace
	LogDir     string
	RunDir     string
}

// Proc is a started process.
type Proc struct {
	Name   string
	PID    int
	Log    string
	exited chan struct{}
	err    error
}

// Start launches s detached from the caller's session and records its pid.
func Start(s Spec) (*Proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find lab binary: %w", err)
	}
	args := []string{RunCommand, "--cgroup", s.Cgroup}
	if s.NetNS != "" {
		args = append(args, "--netns", s.NetNS)
	}
	if s.JoinPID != 0 {
		args = append(args, "--join-pid", strconv.Itoa(s.JoinPID))
	}
	args = append(append(args, "--"), s.Argv...)
	logPath := filepath.Join(s.LogDir, s.Name+".log")
	logf, err := os.OpenFile(filepath.Clean(logPath), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", s.Name, err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(self, args...) //nolint:gosec // G204: runs programs the lab located itself
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if s.NewMountNS {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Proc{Name: s.Name, PID: cmd.Process.Pid, Log: logPath, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	if s.RunDir != "" {
		pidFile := filepath.Join(s.RunDir, s.Name+".pid")
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(p.PID)), 0o600); err != nil {
			return p, fmt.Errorf("write pid file of %s: %w", s.Name, err)
		}
	}
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// WaitReady polls ready until it returns nil, the process exits or ctx ends. A
// failure carries the last lines of the process's log.
func (p *Proc) WaitReady(ctx context.Context, what string, ready func() error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = ready(); last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before %s (%w); last log lines:\n%s", p.Name, what, p.err, Tail(p.Log, 15))
		case <-ctx.Done():
			return fmt.Errorf("%s not %s: %w (%w); last log lines:\n%s", p.Name, what, last, ctx.Err(), Tail(p.Log, 15))
		case <-tick.C:
		}
	}
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Alive reports whether pid names a running (not zombie) process.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// ReadPID reads a pid file; a missing or garbled file yields 0.
func ReadPID(path string) int {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// ErrNotRoot is returned when the lab is used without root.
var ErrNotRoot = errors.New("the lab needs root (namespaces, mounts, cgroups)")

// RSS returns the resident set size of pid in bytes (0 if it is gone).
func RSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}
