package lab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// Options configure a lab command.
type Options struct {
	StateDir string // default /var/lib/estuary-lab
	CacheDir string // image and binary cache, default /var/cache/estuary
	RepoDir  string // estuary checkout (hack/, charts/); found from the working directory when empty
	BinDir   string // prebuilt Kubernetes binaries; hack/kube-binaries.sh when empty
	Nodes    int
	CNI      string // bridge, estuary or flannel
	// Bootstrap is how the cluster is made: BootstrapLab (the lab's own
	// control plane and node daemons, the default) or BootstrapKubeadm.
	Bootstrap         string
	KubernetesVersion string
	ProxyMode         string // iptables or nftables
	IPFamily          string // ipv4 (default), dual or ipv6
	HostAPIPort       int
	// ControlPlaneQPS, when above 0, is the API client rate (queries per
	// second, burst twice that) of kube-controller-manager and kube-scheduler
	// instead of their defaults (20 and 50): make scale creates pods faster
	// than those defaults let a ReplicaSet controller and a scheduler go.
	ControlPlaneQPS int
	// Profiling serves /debug/pprof on kube-apiserver (to its admin), which
	// the lab otherwise turns off: make scale profiles it.
	Profiling bool
	Timeout   time.Duration // for the bring-up, after binaries are built
	Out       io.Writer
}

// Defaults for Options.
const (
	DefaultStateDir          = "/var/lib/estuary-lab"
	DefaultCacheDir          = "/var/cache/estuary"
	DefaultKubernetesVersion = "v1.36.3"
	pauseRepo                = "estuary-lab.local/pause"
	agnhostRepo              = "estuary-lab.local/agnhost"
)

// Lab is one lab, identified by its state directory.
type Lab struct {
	opts  Options
	paths Paths
	plan  *Plan
	p     *progress

	doc InstallDoc // the install guide's steps, with --bootstrap kubeadm

	mu      sync.Mutex
	procs   []*proc.Proc   // started by this command
	holders map[string]int // node name: pid of its namespace holder
}

// setHolder records the pid of a node's namespace holder.
func (l *Lab) setHolder(node string, pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holders == nil {
		l.holders = map[string]int{}
	}
	l.holders[node] = pid
}

// holder is the pid of a node's namespace holder started by this command, or 0.
func (l *Lab) holder(node string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holders[node]
}

// start starts a lab process and remembers it, so that a later wait can fail fast
// (with the process's last log lines) when it dies.
func (l *Lab) start(s proc.Spec) (*proc.Proc, error) {
	p, err := proc.Start(s)
	if p != nil {
		l.mu.Lock()
		l.procs = append(l.procs, p)
		l.mu.Unlock()
	}
	return p, err
}

// exited returns an error naming the first started process that has ended.
func (l *Lab) exited() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		if p.Exited() {
			return fmt.Errorf("%s exited; last log lines (%s):\n%s", p.Name, p.Log, proc.Tail(p.Log, 15))
		}
	}
	return nil
}

// New fills in defaults and returns the lab at opts.StateDir.
func New(opts Options) (*Lab, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", opts.StateDir, err)
	}
	opts.StateDir = abs
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.CNI == "" {
		opts.CNI = "bridge"
	}
	if opts.Bootstrap == "" {
		opts.Bootstrap = BootstrapLab
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = DefaultKubernetesVersion
	}
	if opts.ProxyMode == "" {
		opts.ProxyMode = "iptables"
	}
	if opts.HostAPIPort == 0 {
		opts.HostAPIPort = DefaultHostAPIPort
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Minute
	}
	l := &Lab{opts: opts, paths: Paths{Root: opts.StateDir}, p: newProgress(opts.Out)}
	if err := ValidFamily(opts.IPFamily); err != nil {
		return nil, err
	}
	if opts.IPFamily == "" {
		opts.IPFamily = FamilyIPv4
	}
	if st, err := loadState(l.paths.StateFile()); err == nil && st.Nodes > 0 {
		l.plan, _ = NewFamilyPlan(st.Nodes, st.family())
	}
	if l.plan == nil {
		if l.plan, err = NewFamilyPlan(opts.Nodes, opts.IPFamily); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// requiredCommands are the programs up runs, with the Debian package that has each.
var requiredCommands = map[string]string{
	"containerd": "containerd", "ctr": "containerd", "runc": "runc",
	"iptables": "iptables", "nft": "nftables", "conntrack": "conntrack",
	"ipset": "ipset", "bird": "bird2", "birdc": "bird2", "nsenter": "util-linux",
	"ip": "iproute2",
}

// CNIPluginDir is where Debian's containernetworking-plugins installs the plugins.
const CNIPluginDir = "/usr/lib/cni"

var bridgePlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// checkDeps names every missing program and package.
func (l *Lab) checkDeps() error {
	if os.Geteuid() != 0 {
		return errors.New("estuary-lab needs root: it creates namespaces, mounts and cgroups")
	}
	missing := map[string][]string{}
	for cmd, pkg := range requiredCommands {
		if _, err := exec.LookPath(cmd); err != nil {
			missing[pkg] = append(missing[pkg], cmd)
		}
	}
	for _, p := range bridgePlugins {
		if _, err := os.Stat(filepath.Join(CNIPluginDir, p)); err != nil {
			missing["containernetworking-plugins"] = append(missing["containernetworking-plugins"], CNIPluginDir+"/"+p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var parts []string
	for pkg, what := range missing {
		parts = append(parts, fmt.Sprintf("%s (%s)", pkg, strings.Join(what, ", ")))
	}
	return fmt.Errorf("missing packages: %s; run `make lab-deps` (hack/lab-deps.sh)", strings.Join(parts, "; "))
}

// checkCNI validates the --cni choice (and --bootstrap with it).
func (l *Lab) checkCNI(repo string) error {
	if err := l.checkBootstrap(); err != nil {
		return err
	}
	switch l.opts.CNI {
	case "bridge":
		return nil
	case "estuary":
		chart := filepath.Join(repo, "charts", "estuary", "Chart.yaml")
		if _, err := os.Stat(chart); err != nil {
			return fmt.Errorf("--cni estuary: the estuary chart: %w", err)
		}
		if _, err := exec.LookPath("go"); err != nil {
			return fmt.Errorf("--cni estuary: the go tool builds the estuary images: %w", err)
		}
		return nil
	case "hybridnet":
		if l.opts.IPFamily != FamilyIPv4 {
			return fmt.Errorf("--cni hybridnet: only --ip-family %s is supported", FamilyIPv4)
		}
		if _, err := os.Stat(filepath.Join(hybridnetSrc(repo), "go.mod")); err != nil {
			return fmt.Errorf("--cni hybridnet: hybridnet's source (set %s): %w", HybridnetSrcEnv, err)
		}
		if _, err := exec.LookPath("go"); err != nil {
			return fmt.Errorf("--cni hybridnet: the go tool builds hybridnet: %w", err)
		}
		return nil
	case "flannel":
		if l.opts.IPFamily != FamilyIPv4 {
			return fmt.Errorf("--cni flannel: only --ip-family %s is supported", FamilyIPv4)
		}
		if _, err := os.Stat(filepath.Join(flannelSrc(repo), "go.mod")); err != nil {
			return fmt.Errorf("--cni flannel: the flanneld module: %w", err)
		}
		if _, err := exec.LookPath("go"); err != nil {
			return fmt.Errorf("--cni flannel: the go tool builds flanneld: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("--cni %q: want bridge, estuary, flannel or hybridnet", l.opts.CNI)
	}
}

// repoDir finds the estuary checkout: the option, else the closest parent of the
// working directory whose go.mod declares the estuary module.
func (l *Lab) repoDir() (string, error) {
	if l.opts.RepoDir != "" {
		return l.opts.RepoDir, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if isEstuaryModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no estuary checkout above %s: run from the repository or pass --repo", dir)
		}
	}
}

func isEstuaryModule(gomod string) bool {
	f, err := os.Open(filepath.Clean(gomod))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "module github.com/estuary-cni/estuary" {
			return true
		}
	}
	return false
}

// binaries returns the directory holding the Kubernetes binaries, building them
// through hack/kube-binaries.sh when needed.
func (l *Lab) binaries(repo string) (string, error) {
	if l.opts.BinDir != "" {
		return l.opts.BinDir, nil
	}
	args := []string{filepath.Join(repo, "hack", "kube-binaries.sh"), "kube-apiserver", "kubectl", "etcd",
		"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "agnhost", "coredns"}
	if l.kubeadm() {
		args = append(args, "kubeadm", "kubeadm-etcd", "kubeadm-coredns")
	}
	cmd := exec.Command("bash", args...) //nolint:gosec // G204: runs programs the lab located itself
	cmd.Env = append(os.Environ(), "KUBE_VERSION="+l.opts.KubernetesVersion, "ESTUARY_CACHE="+l.opts.CacheDir)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&stderr, prefixWriter{l.p})
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/kube-binaries.sh: %w\n%s", err, lastLines(stderr.String(), 15))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

type prefixWriter struct{ p *progress }

func (w prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.p.printf("           %s\n", line)
	}
	return len(b), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
