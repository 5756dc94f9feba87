package daemon

// Uninstall: take estuary off a node.
//
// A restarting or upgraded daemon must leave everything in place (pods keep
// their connectivity, the node stays Ready), so the daemon removes nothing
// when it stops. Only when estuary itself goes (its DaemonSet deleted, see
// removal.go, or `estuary-daemon uninstall` run on the node) does the node
// return to what it was before estuary came:
//
//  1. the conflist first, so the runtime stops sending pods to estuary, then
//     the estuary-cni binary and the routing table names;
//  2. the fast path's filters, and the clsact qdiscs left empty by them;
//  3. every kernel object under desired.DefaultOwnership (routes with
//     estuary's protocol or in its tables, its rules, addresses with its
//     mark, permanent neighbours and FDB entries on its links) and every
//     proxy neighbour entry; then its links (the tunnels, the pods' host
//     veths, the VLAN sub-interfaces it marked) and its nft tables;
//  4. the node journal (journal.go): the reference plugins it replaced and
//     the sysctls it changed get their old contents and values back;
//  5. the endpoint store, the journal and the socket.
//
// Pods still running on the node lose their network with their host veths:
// uninstalling is for a node whose pods are gone or may go. Every step runs
// even when one before failed; Uninstall reports every failure.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/estuary-cni/estuary/internal/dataplane"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/sysctl"
)

// UninstallReport says what Uninstall removed and restored.
type UninstallReport struct {
	Files          []string // files removed
	FastPathFilter int      // devices the fast path's filter came off
	Qdiscs         int      // empty clsact qdiscs deleted
	KernelObjects  int      // routes, rules, addresses, neighbours and FDB entries deleted
	Links          []string // links deleted
	Restored       int      // journaled files and sysctls restored
	KeptDirs       []string // directories left because they are mount points (a volume of the daemon's pod)
}

// Uninstall removes estuary from the node cfg describes and restores what
// the daemon replaced. The daemon must have stopped (Run returned). It is
// idempotent: on a clean node it removes nothing and succeeds.
func Uninstall(ctx context.Context, cfg Config) (UninstallReport, error) {
	cfg = cfg.withDefaults()
	sysctl.SetRoot(cfg.ProcSysDir)
	var r UninstallReport
	errs := []error{r.removeCNIFiles(cfg)}
	h, err := ops.Open(cfg.HostNetns)
	if err != nil {
		errs = append(errs, fmt.Errorf("uninstall: %w", err))
	} else {
		errs = append(errs, r.removeKernelState(ctx, h), removeNAT(cfg.HostNetns), removePolicy(cfg.HostNetns))
		h.Close()
	}
	j, err := openJournal(cfg.stateDir(), cfg.HostNetns)
	if err != nil {
		errs = append(errs, err)
	} else {
		files, sysctls, err := j.restore()
		r.Restored = files + sysctls
		errs = append(errs, err)
	}
	for _, dir := range []string{cfg.stateDir(), filepath.Dir(cfg.SocketPath)} {
		errs = append(errs, r.emptyDir(dir))
	}
	return r, errors.Join(errs...)
}

// removeCNIFiles removes the conflist, the plugin binary and the routing
// table names.
func (r *UninstallReport) removeCNIFiles(cfg Config) error {
	paths := []string{filepath.Join(cfg.CNIConfDir, ConflistName), filepath.Join(cfg.CNIBinDir, PluginType)}
	if cfg.RTTablesDir != "" {
		paths = append(paths, filepath.Join(cfg.RTTablesDir, RTTablesName))
	}
	var errs []error
	for _, p := range paths {
		err := os.Remove(p)
		switch {
		case err == nil:
			r.Files = append(r.Files, p)
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("uninstall: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeKernelState removes the fast path, estuary's kernel objects and its
// links from the node's namespace.
func (r *UninstallReport) removeKernelState(ctx context.Context, h *ops.Handle) error {
	var errs []error
	n, err := fastpath.Remove(h.TC())
	r.FastPathFilter = n
	errs = append(errs, err)
	idx, err := h.Links().Indexes()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("uninstall: %w", err))...)
	}
	for name := range idx {
		deleted, err := h.TC().DeleteEmptyClsact(name)
		if deleted {
			r.Qdiscs++
		}
		errs = append(errs, err)
	}
	own := desired.DefaultOwnership()
	own.Neighs = func(n desired.Neigh) bool { return n.Proxy || own.OwnsDevice(n.Dev) }
	plan, err := dataplane.NewReconciler(h, own).Reconcile(ctx, desired.State{})
	r.KernelObjects = plan.Len()
	errs = append(errs, err)
	errs = append(errs, r.removeLinks(h, own, idx))
	return errors.Join(errs...)
}

// removeLinks deletes the links estuary owns by name and the VLAN
// sub-interfaces it marked.
func (r *UninstallReport) removeLinks(h *ops.Handle, own desired.Ownership, idx map[string]int) error {
	var errs []error
	vlans, err := h.VLANs().List()
	if err != nil && !ops.VLANUnsupported(err) {
		errs = append(errs, fmt.Errorf("uninstall: %w", err))
	}
	for _, v := range vlans {
		if !v.Marked {
			continue
		}
		if err := h.VLANs().DeleteMarked(v.Name); err != nil {
			errs = append(errs, fmt.Errorf("uninstall: %w", err))
			continue
		}
		r.Links = append(r.Links, v.Name)
	}
	for name := range idx {
		if !own.OwnsDevice(name) {
			continue
		}
		if err := h.Links().Delete(name); err != nil {
			errs = append(errs, fmt.Errorf("uninstall: %w", err))
			continue
		}
		r.Links = append(r.Links, name)
	}
	return errors.Join(errs...)
}

// removeNAT deletes estuary's nft tables.
func removeNAT(nsPath string) error {
	nat, err := ops.OpenNAT(nsPath)
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	defer nat.Close()
	if _, err := nat.Ensure(desired.NAT{}); err != nil {
		return fmt.Errorf("uninstall: nat: %w", err)
	}
	return nil
}

// emptyDir removes dir with everything in it. A dir that is a mount point
// (the daemon pod's volume) cannot go: its contents do, and it is reported
// in KeptDirs.
func (r *UninstallReport) emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("uninstall: %w", err))
			continue
		}
		r.Files = append(r.Files, p)
	}
	err = os.Remove(dir)
	switch {
	case err == nil:
		r.Files = append(r.Files, dir)
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.EROFS):
		// A mount point of the daemon's pod: busy, or on a read-only
		// root filesystem.
		r.KeptDirs = append(r.KeptDirs, dir)
	default:
		errs = append(errs, fmt.Errorf("uninstall: %w", err))
	}
	return errors.Join(errs...)
}

// String summarises the report for a log line.
func (r UninstallReport) String() string {
	return fmt.Sprintf("removed %d files, %d kernel objects, links [%s], the fast path from %d devices, %d qdiscs; restored %d; kept mount points [%s]",
		len(r.Files), r.KernelObjects, strings.Join(r.Links, " "), r.FastPathFilter, r.Qdiscs, r.Restored, strings.Join(r.KeptDirs, " "))
}
