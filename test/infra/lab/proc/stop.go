package proc

// Stopping: a process the lab kills is not gone when the signal is sent, nor
// when it leaves its cgroup: it becomes a zombie until its parent reaps it, and
// the lab's processes are orphans, so that parent is init, which may reap late
// (a second or more on some machines). A Stopper holds a pidfd for every
// process it kills, which names that process and no other even after its pid is
// reused, and waits until signalling the pidfd fails with ESRCH: the kernel
// says so only once the process has been reaped and its pid released.

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollEvery is how often a Stopper looks at what it waits for.
const pollEvery = 20 * time.Millisecond

// Stopper kills processes and waits until they are gone. Its zero value is not
// usable; use NewStopper, and Close it.
type Stopper struct {
	killed map[int]*victim
	errs   []error
}

type victim struct {
	pid   int
	pidfd int
	what  string // command line when killed, for errors
}

// NewStopper returns an empty Stopper.
func NewStopper() *Stopper { return &Stopper{killed: map[int]*victim{}} }

// Kill SIGKILLs pid, remembering it for Wait; killing it again resends the
// signal. A process that is already gone is not an error.
func (s *Stopper) Kill(pid int) {
	v := s.killed[pid]
	if v == nil {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			return
		}
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("cannot wait for process %d (%s): pidfd_open: %w", pid, describe(pid), err))
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		v = &victim{pid: pid, pidfd: fd, what: describe(pid)}
		s.killed[pid] = v
	}
	if err := unix.PidfdSendSignal(v.pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		s.errs = append(s.errs, fmt.Errorf("kill process %d (%s): %w", pid, v.what, err))
	}
}

// Killed is the number of processes Kill has signalled.
func (s *Stopper) Killed() int { return len(s.killed) }

// KillCgroup kills every process in rel or below until none is left there or
// deadline passes.
func (s *Stopper) KillCgroup(rel string, deadline time.Time) error {
	for {
		pids := CgroupPIDs(rel)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still in cgroup %s: %v", rel, pids)
		}
		for _, pid := range pids {
			s.Kill(pid)
		}
		time.Sleep(pollEvery)
	}
}

// Wait returns once every killed process is gone (exited and reaped), or at
// deadline with an error naming each one that is not, and what errors Kill met.
func (s *Stopper) Wait(deadline time.Time) error {
	for {
		left := s.left()
		if len(left) == 0 {
			return errors.Join(s.errs...)
		}
		if time.Now().After(deadline) {
			errs := s.errs
			for _, v := range left {
				errs = append(errs, fmt.Errorf("process %d (%s) %s", v.pid, v.what, stateOf(v.pid)))
			}
			return errors.Join(errs...)
		}
		time.Sleep(pollEvery)
	}
}

// left lists the killed processes that still exist, by pid.
func (s *Stopper) left() []*victim {
	var out []*victim
	for _, v := range s.killed {
		if err := unix.PidfdSendSignal(v.pidfd, 0, nil, 0); !errors.Is(err, unix.ESRCH) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// Close releases the pidfds.
func (s *Stopper) Close() {
	for pid, v := range s.killed {
		_ = unix.Close(v.pidfd)
		delete(s.killed, pid)
	}
}

// describe returns pid's command line, shortened, or its name.
func describe(pid int) string {
	c := Cmdline(pid)
	if c == "" {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		c = strings.TrimSpace(string(b))
	}
	if len(c) > 120 {
		c = c[:117] + "..."
	}
	return c
}

// stateOf says why a killed process still exists.
func stateOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "still exists"
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the state and the parent follow the name
	if i < 0 {
		return "still exists"
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "still exists"
	}
	if f[0] == "Z" {
		return "exited but its parent, process " + f[1] + ", has not reaped it"
	}
	return "is still running (state " + f[0] + ")"
}

// Cmdline returns pid's command line with spaces between the arguments ("" for
// a process that is gone or a kernel thread).
func Cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
