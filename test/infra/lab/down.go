package lab

// Cleanup strategy: the state file says what a lab made, but down never depends on
// it. Everything the lab creates is findable by convention: every process runs below
// the cgroup named Prefix (in every hierarchy), every network namespace is pinned as
// /var/run/netns/<Prefix>-*, and every file lives under the state directory (plus the
// empty host mount points the node holders had to create, listed in each node's
// directory). Down therefore kills the cgroup's processes until none is left (pod
// processes, containerd shims and the namespace holders included; with them go the
// node mount namespaces and every mount inside them) and waits until every process
// it killed is gone from the process table, reaped and not only exited (see
// proc.Stopper), so no process of the lab exists once down returns. It then deletes
// the namespaces (and with them every veth and bridge), removes the created mount
// points and the state directory's contents. Each stage runs even if an earlier one failed, and running it
// again after a crash finishes the job.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
	"github.com/estuary-cni/estuary/test/infra/lab/nodens"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
	"github.com/vishvananda/netlink"
)

// stateEntries are the names the lab writes in its state directory; down removes
// only these, so a mistaken --state-dir never loses unrelated files.
var stateEntries = []string{"state.json", "state.json.tmp", "kubeconfig", "pki", "logs", "run",
	"control-plane", "router", "nodes", "kubectl-cache", "estuary", "coredns.json", "registry",
	"flannel-rbac.json"}

// Down removes the lab and verifies that nothing is left.
func (l *Lab) Down() error {
	if os.Geteuid() != 0 {
		return errors.New("estuary-lab needs root to remove the lab")
	}
	err := l.cleanup()
	left := Leftovers(l.paths.Root)
	if len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("left behind:\n  %s", strings.Join(left, "\n  ")))
	}
	if err == nil {
		l.step("lab removed")
	}
	return err
}

func (l *Lab) cleanup() error {
	var errs []error
	l.step("stopping lab processes (cgroup %s)", Prefix)
	errs = append(errs, l.stopProcesses())
	l.step("removing network namespaces %s-*", Prefix)
	errs = append(errs, deleteNamespaces())
	l.step("removing mounts and files under %s", l.paths.Root)
	errs = append(errs, l.removeMountPoints(), unmountUnder(l.paths.Root), l.removeState())
	return errors.Join(errs...)
}

// stopProcesses kills every process of the lab, waits until each one is gone and
// removes the lab's cgroups.
func (l *Lab) stopProcesses() error {
	stop := proc.NewStopper()
	defer stop.Close()
	l.killPIDFiles(stop)
	killErr := stop.KillCgroup(Prefix, time.Now().Add(killTimeout))
	reap := time.Now().Add(reapTimeout)
	waitErr := stop.Wait(reap)
	if waitErr == nil && stop.Killed() > 0 {
		l.step("%d lab processes gone", stop.Killed())
	}
	return errors.Join(killErr, waitErr, proc.RemoveCgroup(Prefix, reap))
}

const (
	// killTimeout bounds killing the lab's processes until none is left in its cgroup.
	killTimeout = 30 * time.Second
	// reapTimeout bounds waiting until the killed processes are reaped, and
	// until the kernel lets the emptied cgroups go.
	reapTimeout = 15 * time.Second
)

// killPIDFiles kills recorded processes that somehow escaped the cgroup (for
// example a helper killed before it joined it).
func (l *Lab) killPIDFiles(stop *proc.Stopper) {
	files, _ := filepath.Glob(filepath.Join(l.paths.Run(), "*.pid"))
	for _, f := range files {
		if pid := proc.ReadPID(f); pid > 1 && proc.Alive(pid) && strings.Contains(proc.Cmdline(pid), l.paths.Root) {
			stop.Kill(pid)
		}
	}
}

func deleteNamespaces() error {
	names, err := netlab.List(Prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, netlab.Delete(n))
	}
	links, _ := netlink.LinkList()
	for _, lk := range links {
		if strings.HasPrefix(lk.Attrs().Name, Prefix) {
			errs = append(errs, netlink.LinkDel(lk))
		}
	}
	return errors.Join(errs...)
}

// removeMountPoints removes the empty host directories the node holders created as
// mount points.
func (l *Lab) removeMountPoints() error {
	dirs, _ := filepath.Glob(filepath.Join(l.paths.Root, "nodes", "*", nodens.CreatedFile))
	var all []string
	seen := map[string]bool{}
	for _, f := range dirs {
		b, err := os.ReadFile(filepath.Clean(f))
		if err != nil {
			continue
		}
		for _, d := range strings.Fields(string(b)) {
			if !seen[d] {
				seen[d] = true
				all = append(all, d)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return len(all[i]) < len(all[j]) })
	nodens.RemoveEmpty(all)
	return nil
}

// unmountUnder detaches any mount of this namespace below root (none is expected:
// node mounts live in the node namespaces).
func unmountUnder(root string) error {
	var errs []error
	mps := mountsUnder(root+"/", "/proc/self/mountinfo")
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, mp := range mps {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

func (l *Lab) removeState() error {
	var errs []error
	for _, e := range stateEntries {
		if err := os.RemoveAll(filepath.Join(l.paths.Root, e)); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", e, err))
		}
	}
	if ents, err := os.ReadDir(l.paths.Root); err == nil && len(ents) == 0 {
		_ = os.Remove(l.paths.Root)
	}
	return errors.Join(errs...)
}
