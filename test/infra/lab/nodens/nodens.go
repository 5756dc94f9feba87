// Package nodens owns a lab node's mount namespace: the "machine" that the node's
// containerd, kubelet and kube-proxy share.
//
// Design (mount namespace layout): a holder process is started in the node's
// network namespace and in fresh mount and UTS namespaces. It first turns the whole
// tree into slave mounts, so nothing it mounts ever propagates back to the host but
// host mounts still show through. Then it bind-mounts one directory per standard
// host path from the node's state directory over that path (/etc/cni/net.d,
// /opt/cni/bin, /var/lib/kubelet, /var/lib/containerd, /run/containerd, /var/run/netns,
// /var/log/pods, /var/lib/cni, /var/lib/estuary, /run/estuary, flannel's /run/flannel and
// /etc/kube-flannel, and the few other places kubelet,
// containerd and mount(8) write: /var/log/containers, /opt/containerd, /run/mount) and
// marks each rshared, the
// propagation kubelet expects for its root directory and that mount propagation of
// volumes relies on. Finally it mounts a sysfs of the node's own network namespace
// on /sys, moves the host's cgroup hierarchies back under /sys/fs/cgroup, and marks
// / itself shared (in a peer group of its own, so still nothing reaches the host),
// as / is on a systemd machine: containerd accepts a HostToContainer volume only
// below a shared or slave mount and looks the mount up by the unresolved path, so
// /var/run/netns (/var/run being a symlink) is judged by /, which would otherwise
// stay private on a host whose / is private. The node's daemons enter the holder's
// namespaces (nsenter), so a DaemonSet hostPath and every kubelet or containerd
// default path resolve per node exactly as on a separate machine. The namespaces
// live as long as the holder; killing it and the daemons removes every mount at once.
package nodens

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// HolderCommand is the hidden subcommand of the lab binary that HolderMain implements.
const HolderCommand = "_node-holder"

// Mount maps one standard host path to a directory name in the node's state dir.
type Mount struct {
	Target string // path inside the node
	Source string // directory name below the node's state dir
}

// Mounts are the per-node host paths.
var Mounts = []Mount{
	{"/etc/cni/net.d", "etc-cni-net.d"},
	{"/opt/cni/bin", "opt-cni-bin"},
	{"/var/lib/kubelet", "var-lib-kubelet"},
	{"/var/lib/containerd", "var-lib-containerd"},
	{"/run/containerd", "run-containerd"},
	{"/var/run/netns", "run-netns"},
	{"/var/log/pods", "var-log-pods"},
	{"/var/lib/cni", "var-lib-cni"},
	{"/var/lib/estuary", "var-lib-estuary"},
	{"/run/estuary", "run-estuary"},                           // the estuary daemon's CNI socket
	{"/var/log/containers", "var-log-containers"},             // kubelet's log symlinks
	{"/opt/containerd", "opt-containerd"},                     // containerd's "opt" plugin
	{"/run/mount", "run-mount"},                               // libmount's utab, written by mount(8)
	{"/etc/iproute2/rt_tables.d", "etc-iproute2-rt_tables.d"}, // the daemon's routing table names
	{"/run/flannel", "run-flannel"},                           // flanneld's lease (subnet.env), with --cni flannel
	{"/etc/kube-flannel", "etc-kube-flannel"},                 // flannel's net-conf.json, with --cni flannel
	{"/etc/kubernetes", "etc-kubernetes"},                     // kubeadm's configuration, certificates and static pods, with --bootstrap kubeadm
	{"/var/lib/etcd", "var-lib-etcd"},
	{"/run/cni", "run-cni"}, // hybridnet's daemon socket, with --cni hybridnet                         // etcd's data on a kubeadm control-plane node
}

// CreatedFile lists, inside a node's state dir, the host mount points the holder had
// to create; cleanup removes them when they are still empty.
const CreatedFile = "created-mountpoints"

// ReadyFile is written into the node's state dir once the mounts are in place.
const ReadyFile = "holder.ready"

// HolderMain sets up the node's mounts and then waits for SIGTERM or SIGKILL.
func HolderMain(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: %s NODE-NAME NODE-STATE-DIR", HolderCommand)
	}
	name, dir := args[0], args[1]
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("set hostname %s: %w", name, err)
	}
	if err := Setup(dir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReadyFile), []byte("ok\n"), 0o600); err != nil {
		return fmt.Errorf("write ready file: %w", err)
	}
	fmt.Println("node mounts ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

// Setup performs the mounts described in the package comment. It must run in the
// node's fresh mount namespace.
func Setup(dir string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	var created []string
	for _, m := range Mounts {
		src := filepath.Join(dir, m.Source)
		if err := os.MkdirAll(src, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", src, err)
		}
		target, err := filepath.EvalSymlinks(filepath.Dir(m.Target))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("resolve %s: %w", m.Target, err)
		}
		if err == nil {
			target = filepath.Join(target, filepath.Base(m.Target))
		} else {
			target = m.Target
		}
		made, err := mkdirAllTrack(target)
		if err != nil {
			return err
		}
		created = append(created, made...)
		if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, target, err)
		}
		if err := unix.Mount("", target, "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
			return fmt.Errorf("make %s rshared: %w", target, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, CreatedFile), []byte(strings.Join(created, "\n")), 0o600); err != nil {
		return fmt.Errorf("record created mount points: %w", err)
	}
	if err := remountSys(filepath.Join(dir, ".cgroup-staging")); err != nil {
		return err
	}
	// Last: while / is shared, unmounting the cgroup staging bind would propagate
	// to its copies under /sys/fs/cgroup.
	if err := unix.Mount("", "/", "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	return nil
}

// remountSys mounts a sysfs that shows the node's network namespace on /sys and
// puts the host's cgroup hierarchies back below it.
func remountSys(staging string) error {
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", staging, err)
	}
	if err := unix.Mount("/sys/fs/cgroup", staging, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("stage cgroup mounts: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount sysfs for the node's network namespace: %w", err)
	}
	if err := unix.Mount(staging, "/sys/fs/cgroup", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("restore cgroup mounts under /sys: %w", err)
	}
	if err := unix.Unmount(staging, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount cgroup staging: %w", err)
	}
	return nil
}

// mkdirAllTrack creates path and returns the directories it had to create,
// outermost first.
func mkdirAllTrack(path string) ([]string, error) {
	var missing []string
	for p := path; p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		missing = append([]string{p}, missing...)
	}
	// Host mount points are ordinary system directories, readable by all.
	if err := os.MkdirAll(path, 0o755); err != nil { //nolint:gosec // G301: see above
		return nil, fmt.Errorf("create mount point %s: %w", path, err)
	}
	return missing, nil
}

// RemoveEmpty removes the listed directories that are empty, deepest first, and
// returns those removed.
func RemoveEmpty(dirs []string) []string {
	var removed []string
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err == nil {
			removed = append(removed, dirs[i])
		}
	}
	return removed
}
