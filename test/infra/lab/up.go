package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/images"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// Image tags the lab imports into every node.
const (
	PauseImage   = pauseRepo + ":lab"
	AgnhostImage = agnhostRepo + ":lab"
)

// Up brings the lab up from scratch: a previous lab at the same state directory,
// whole or half-made, is removed first, so Up is idempotent.
func (l *Lab) Up(ctx context.Context) error {
	plan, err := NewFamilyPlan(l.opts.Nodes, l.opts.IPFamily)
	if err != nil {
		return err
	}
	l.step("checking dependencies")
	if err := l.checkDeps(); err != nil {
		return err
	}
	repo, err := l.repoDir()
	if err != nil {
		return err
	}
	if err := l.checkCNI(repo); err != nil {
		return err
	}
	if l.kubeadm() {
		if l.doc, err = ReadInstallDoc(repo); err != nil {
			return err
		}
	}
	l.step("removing any previous lab in %s", l.paths.Root)
	if err := l.cleanup(); err != nil {
		return fmt.Errorf("clean previous lab: %w", err)
	}
	l.plan = plan
	st, err := l.prepare(repo)
	if err != nil {
		return err
	}
	// The timeout bounds the bring-up, not a first (cold) build of the binaries.
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	if err := l.bringUp(ctx, st); err != nil {
		return err
	}
	return l.finish(ctx, st)
}

func (l *Lab) step(format string, args ...any) { l.p.step(format, args...) }

// prepare creates the state directory and record, binaries, images and credentials.
func (l *Lab) prepare(repo string) (*State, error) {
	for _, d := range []string{l.paths.Root, l.paths.Logs(), l.paths.Run(), l.paths.ControlPlane()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	st := &State{Phase: "starting", Nodes: len(l.plan.Nodes), CNI: l.opts.CNI, Bootstrap: l.opts.Bootstrap, ProxyMode: l.opts.ProxyMode,
		KubernetesVersion: l.opts.KubernetesVersion, HostAPIPort: l.opts.HostAPIPort, IPFamily: l.opts.IPFamily,
		Namespaces: l.plan.namespaces(), StartedAt: time.Now()}
	if err := st.save(l.paths.StateFile()); err != nil {
		return nil, err
	}
	l.step("Kubernetes %s binaries (hack/kube-binaries.sh, cached in %s)", l.opts.KubernetesVersion, l.opts.CacheDir)
	bin, err := l.binaries(repo)
	if err != nil {
		return nil, err
	}
	st.BinDir = bin
	l.step("images (pause, coredns, and agnhost, glibc-dns-testing, busybox, nginx under their upstream names)")
	if st.Images, err = l.images(repo, bin); err != nil {
		return nil, err
	}
	if l.kubeadm() {
		l.step("kubeadm's control-plane images, built here and named as `kubeadm config images list` names them")
		st.Kubeadm = &KubeadmState{}
		var archives []string
		if st.Kubeadm.Images, archives, err = l.kubeadmImages(repo, filepath.Join(l.opts.CacheDir, "lab", "images"), bin); err != nil {
			return nil, err
		}
		st.Images = append(st.Images, archives...)
	}
	if l.opts.CNI == "estuary" {
		if st.Estuary, err = l.prepareEstuary(repo); err != nil {
			return nil, err
		}
	}
	if l.opts.CNI == "flannel" {
		if st.Flannel, err = l.prepareFlannel(repo); err != nil {
			return nil, err
		}
	}
	if l.opts.CNI == "hybridnet" {
		var archive string
		if st.Hybridnet, archive, err = l.prepareHybridnet(repo); err != nil {
			return nil, err
		}
		st.Images = append(st.Images, archive)
	}
	if !l.kubeadm() { // kubeadm makes the cluster's own
		l.step("credentials (CA, certificates, kubeconfigs)")
		if err := l.credentials(); err != nil {
			return nil, err
		}
	}
	return st, st.save(l.paths.StateFile())
}

// images builds (or takes from the cache) the image tarballs and returns their paths.
func (l *Lab) images(repo, bin string) ([]string, error) {
	cache := filepath.Join(l.opts.CacheDir, "lab", "images")
	pauseBin, err := images.BuildPause(filepath.Join(repo, "hack", "images", "pause"), cache)
	if err != nil {
		return nil, err
	}
	pause, err := images.CachedFull(cache, "pause", images.Image{Tag: PauseImage, Tags: []string{images.UpstreamPause},
		Binary: pauseBin, Path: "/pause"})
	if err != nil {
		return nil, err
	}
	tests, err := l.testImages(cache, bin)
	if err != nil {
		return nil, err
	}
	if l.kubeadm() { // kubeadm deploys its own CoreDNS image
		return append([]string{pause}, tests...), nil
	}
	return appendCoreDNS(append([]string{pause}, tests...), cache, bin)
}

// bringUp builds the network, then runs the router, the control plane and every
// node concurrently (kubelets retry until the API server answers).
func (l *Lab) bringUp(ctx context.Context, st *State) error {
	l.step("network: switch %s, router %s, external %s, %d nodes", l.plan.Switch, l.plan.Router.Addr,
		l.plan.External.Addr, len(l.plan.Nodes))
	if err := l.buildNetwork(); err != nil {
		return err
	}
	l.step("starting router (bird, AS %d), control plane and nodes", RouterASN)
	in := nodeInputs{bin: st.BinDir, pause: PauseImage, archives: st.Images, flannel: st.Flannel}
	var wg sync.WaitGroup
	errs := make([]error, len(l.plan.Nodes)+2)
	run := func(i int, f func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	run(0, func() error { return l.startRouter(ctx) })
	if !l.kubeadm() {
		run(1, func() error { return l.startControlPlane(ctx, st.BinDir) })
	}
	for i, n := range l.plan.Nodes {
		run(i+2, func() error { return l.startNode(ctx, n, in) })
	}
	wg.Wait()
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("bring-up failed (lab left for inspection; `estuary-lab down` removes it):\n%s",
			strings.Join(msgs, "\n"))
	}
	if l.kubeadm() {
		if err := l.kubeadmCluster(ctx, st, l.doc); err != nil {
			return fmt.Errorf("kubeadm bring-up failed (lab left for inspection; `estuary-lab down` removes it): %w", err)
		}
	}
	return nil
}

// finish installs estuary (with --cni estuary) or starts flanneld (with --cni
// flannel), waits for the nodes and the default
// ServiceAccount, installs the cluster DNS, records the lab as running and prints
// how to use it.
func (l *Lab) finish(ctx context.Context, st *State) error {
	switch {
	case st.Estuary != nil && l.kubeadm():
		if err := l.installEstuaryFromDoc(ctx, st, l.doc); err != nil {
			return err
		}
	case st.Estuary != nil:
		if err := l.installEstuary(ctx, st); err != nil {
			return err
		}
	}
	if st.Flannel != nil {
		if err := l.startFlannel(ctx, st); err != nil {
			return err
		}
	}
	if st.Hybridnet != nil {
		if err := l.installHybridnet(ctx, st); err != nil {
			return err
		}
	}
	l.step("waiting for %d nodes to be Ready", len(l.plan.Nodes))
	nodes, err := l.waitNodes(ctx, st.BinDir, true)
	if err != nil {
		return err
	}
	if err := l.waitServiceAccount(ctx, st.BinDir); err != nil {
		return err
	}
	if !l.kubeadm() { // kubeadm installed CoreDNS
		if err := l.installDNS(ctx, st.BinDir); err != nil {
			return err
		}
	}
	st.Phase, st.ReadyAt = "running", time.Now()
	if err := st.save(l.paths.StateFile()); err != nil {
		return err
	}
	l.step("lab is up")
	for _, n := range nodes {
		m, _ := l.plan.Node(n.Name)
		cidr := m.PodCIDR.String()
		if n.PodCIDR != "" {
			cidr = n.PodCIDR // kube-controller-manager's with --cni flannel
		}
		l.p.printf("  %-8s Ready=%-5v %-12s pods %s  %s\n", n.Name, n.Ready, m.Addr, cidr, n.Version)
	}
	if e := st.Estuary; e != nil {
		l.p.printf("  estuary %s from %s (release %s in %s)\n  images %s, %s\n", e.ChartVersion, e.Chart, e.Release, e.Namespace,
			e.Images["estuary-manager"], e.Images["estuary-daemon"])
	}
	if f := st.Flannel; f != nil {
		l.p.printf("  flannel %s, backend %s (%s), leases in %s\n", f.Version, f.Backend, FlannelDevice, FlannelSubnetFile)
	}
	l.p.printf("\nexport KUBECONFIG=%s\n", l.paths.Kubeconfig())
	return nil
}

// Memory returns the memory charged to the lab's cgroup and the summed resident
// set size of its processes, in bytes.
func Memory() (cgroup, rss uint64, err error) {
	cgroup, err = proc.MemoryUsage(Prefix)
	if err != nil {
		return 0, 0, err
	}
	for _, pid := range proc.CgroupPIDs(Prefix) {
		rss += proc.RSS(pid)
	}
	return cgroup, rss, nil
}
