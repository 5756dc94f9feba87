package lab

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
	"github.com/vishvananda/netlink"
)

// Leftovers lists everything of a lab at stateDir that still exists: processes in
// the lab cgroup or naming the state directory, lab network namespaces, lab cgroups,
// host links with the lab prefix, mounts (in any process's mount namespace) below the
// state directory or of lab namespaces, and files of the state directory.
func Leftovers(stateDir string) []string {
	var out []string
	for _, pid := range proc.CgroupPIDs(Prefix) {
		out = append(out, fmt.Sprintf("process %d in cgroup %s: %s", pid, Prefix, proc.Cmdline(pid)))
	}
	out = append(out, processesNaming(stateDir)...)
	if names, _ := netlab.List(Prefix); len(names) > 0 {
		for _, n := range names {
			out = append(out, "network namespace "+n)
		}
	}
	for _, c := range proc.CgroupExists(Prefix) {
		out = append(out, "cgroup "+c)
	}
	links, _ := netlink.LinkList()
	for _, lk := range links {
		if strings.HasPrefix(lk.Attrs().Name, Prefix) {
			out = append(out, "host link "+lk.Attrs().Name)
		}
	}
	out = append(out, foreignMounts(stateDir)...)
	if ents, err := os.ReadDir(stateDir); err == nil {
		for _, e := range ents {
			out = append(out, "file "+filepath.Join(stateDir, e.Name()))
		}
	}
	return out
}

func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

func processesNaming(stateDir string) []string {
	var out []string
	for _, pid := range pids() {
		if c := proc.Cmdline(pid); strings.Contains(c, stateDir+"/") && proc.Alive(pid) {
			out = append(out, fmt.Sprintf("process %d: %s", pid, c))
		}
	}
	return out
}

// foreignMounts finds mounts below stateDir or of lab namespaces in the mount
// namespace of any process (one report per mount namespace).
func foreignMounts(stateDir string) []string {
	var out []string
	seen := map[string]bool{}
	for _, pid := range pids() {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		info := fmt.Sprintf("/proc/%d/mountinfo", pid)
		for _, mp := range append(mountsUnder(stateDir+"/", info), mountsUnder(filepath.Join(netlab.NSDir, Prefix), info)...) {
			out = append(out, fmt.Sprintf("mount %s (mount namespace %s of pid %d)", mp, ns, pid))
		}
	}
	return out
}

// mountsUnder lists mount points in a mountinfo file that start with prefix.
func mountsUnder(prefix, mountinfo string) []string {
	f, err := os.Open(filepath.Clean(mountinfo))
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	alt := strings.Replace(prefix, "/var/run/", "/run/", 1)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := fields[4]
		if strings.HasPrefix(mp, prefix) || strings.HasPrefix(mp, alt) {
			out = append(out, mp)
		}
	}
	return out
}
