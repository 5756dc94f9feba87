//go:build lab

package lab_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// labProc is one process of the lab, told apart from a later process with the
// same pid by its start time.
type labProc struct {
	pid     int
	started string // field 22 of /proc/<pid>/stat, in clock ticks since boot
	cmd     string
}

// statOf returns the state and the start time of pid ("" if it does not exist).
func statOf(pid int) (state, started string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3
	if len(f) < 20 {
		return "", ""
	}
	return f[0], f[19]
}

// labProcesses lists the processes of the lab at stateDir: those in the lab's
// cgroup and those whose command line names the state directory.
func labProcesses(stateDir string) []labProc {
	pids := map[int]bool{}
	for _, pid := range proc.CgroupPIDs(lab.Prefix) {
		pids[pid] = true
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() &&
			strings.Contains(proc.Cmdline(pid), stateDir+"/") {
			pids[pid] = true
		}
	}
	var out []labProc
	for pid := range pids {
		if _, started := statOf(pid); started != "" {
			out = append(out, labProc{pid: pid, started: started, cmd: proc.Cmdline(pid)})
		}
	}
	return out
}

// requireGone fails t for every process of ps that still exists, running or as
// a zombie nobody has reaped yet.
func requireGone(t *testing.T, ps []labProc) {
	t.Helper()
	for _, p := range ps {
		if state, started := statOf(p.pid); started == p.started {
			t.Errorf("process %d (%s) still exists right after down returned (state %s)", p.pid, p.cmd, state)
		}
	}
}
