package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/internal/faultinject"
	"github.com/estuary-cni/estuary/internal/release"
	"github.com/estuary-cni/estuary/test/infra/lab/images"
)

// The estuary install of `up --cni estuary`: the checkout released into the
// lab's registry (registry.go) and installed from there with the checkout's
// helm as one release in kube-system.
const (
	EstuaryRelease   = "estuary"
	EstuaryNamespace = "kube-system"
	// Names the chart gives the workloads (charts/estuary).
	estuaryDaemonSet  = "estuary-daemon"
	estuaryDeployment = "estuary-manager"
)

// EstuaryState records the estuary install of a lab.
type EstuaryState struct {
	// Chart is the chart's OCI reference in the lab's registry, installed at
	// ChartVersion (the release's version).
	Chart        string `json:"chart"`
	ChartVersion string `json:"chartVersion"`
	Release      string `json:"release"`
	Namespace    string `json:"namespace"`
	Values       string `json:"values"` // the values file the release was installed with
	Helm         string `json:"helm"`
	// Registry is where the release was pushed, as the host names it
	// (127.0.0.1:<port>/estuary).
	Registry    string            `json:"registry"`
	RegistryBin string            `json:"registryBin"`
	Repo        string            `json:"repo"`   // the checkout released
	Commit      string            `json:"commit"` // its commit and date (hack/version.sh)
	Created     time.Time         `json:"created"`
	Images      map[string]string `json:"images,omitempty"` // image name: reference by digest
	InstalledAt time.Time         `json:"installedAt,omitzero"`
}

// estuaryDir holds the values file and helm's own cache, config and data.
func (p Paths) estuaryDir() string { return filepath.Join(p.Root, "estuary") }

// LabAltUplink is the other uplink name the lab's estuary values prefer to
// eth0 for VLAN networks (underlay.vlanUplinks).
const LabAltUplink = "ens5"

// EstuaryValues returns the chart values the lab installs estuary with: the
// lab's pod range as the default overlay subnet. The images are the chart's
// defaults, the release's in the lab registry. The admission webhook is on:
// the lab's kube-apiserver runs with --enable-aggregator-routing=true, so it
// dials the webhook Service's endpoints (the manager's node address, on the
// switch) rather than its ClusterIP, which the control plane, running no
// kube-proxy, cannot reach.
//
// A dual-stack or IPv6-only lab's default network has a subnet per family
// (overlay-v4, overlay-v6), and its pods take every family of it
// (manager.defaultIPFamily: Network), as pods of a dual-stack cluster do.
func EstuaryValues(plan *Plan) ([]byte, error) {
	var subnets []map[string]any
	for _, s := range plan.Stacks() {
		subnets = append(subnets, map[string]any{"name": s.overlaySubnetName(), "cidr": s.OverlaySubnet().String(), "natOutgoing": true})
	}
	v := map[string]any{
		// Debian's containerd 1.6 vendors a CNI library that parses results up
		// to 1.0.0 only.
		"daemon": map[string]any{"cniVersion": "1.0.0"},
		"defaultNetwork": map[string]any{
			"enabled": true,
			"subnets": subnets,
		},
		// Nodes may name their uplink otherwise: a node with an ens5 uses
		// it for its VLAN networks, the others their eth0 (TestPerNodeUplinks).
		"underlay": map[string]any{"vlanUplinks": []string{LabAltUplink, "eth0"}},
	}
	if plan.Family != FamilyIPv4 {
		v["manager"] = map[string]any{"defaultIPFamily": "Network"}
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode estuary values: %w", err)
	}
	return b, nil
}

// defaultNetworkObjects are the Network and Subnets of EstuaryValues' default
// network (the chart's default network name and the subnets named there).
func (p *Plan) defaultNetworkObjects() []string {
	out := []string{"networks.networking.estuary.io/overlay"}
	for _, s := range p.Stacks() {
		out = append(out, "subnets.networking.estuary.io/"+s.overlaySubnetName())
	}
	return out
}

func (p *Plan) overlaySubnetName() string {
	if p.IPv6() {
		return "overlay-v6"
	}
	return "overlay-v4"
}

// prepareEstuary installs helm and the registry into the checkout's bin
// directory, reads the checkout's version and returns what the install will
// use.
func (l *Lab) prepareEstuary(repo string) (*EstuaryState, error) {
	l.step("helm (hack/helm.sh) and the distribution registry (hack/registry.sh)")
	helm, err := l.runScript(filepath.Join(repo, "hack", "helm.sh"))
	if err != nil {
		return nil, err
	}
	reg, err := l.runScript(filepath.Join(repo, "hack", "registry.sh"))
	if err != nil {
		return nil, err
	}
	v, err := checkoutVersion(repo)
	if err != nil {
		return nil, err
	}
	if err := l.writeRegistryHosts(); err != nil {
		return nil, err
	}
	e := &EstuaryState{ChartVersion: v.version, Release: EstuaryRelease, Namespace: EstuaryNamespace,
		Values: filepath.Join(l.paths.estuaryDir(), "values.yaml"), Helm: helm,
		Registry: l.registryHostAddr() + "/" + registryPath, RegistryBin: reg, Repo: repo, Commit: v.commit, Created: v.created}
	e.Chart = "oci://" + e.Registry + "/charts/estuary"
	return e, nil
}

// runScript runs a bash script of the checkout and returns the last line it printed.
func (l *Lab) runScript(script string, env ...string) (string, error) {
	cmd := exec.Command("bash", script) //nolint:gosec // G204: runs programs the lab located itself
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&stderr, prefixWriter{l.p})
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, lastLines(stderr.String(), 15))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// installEstuary installs the chart once every node has registered, then waits for
// the daemon on every node and for the manager.
func (l *Lab) installEstuary(ctx context.Context, st *State) error {
	e := st.Estuary
	values, err := EstuaryValues(l.plan)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.paths.estuaryDir(), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", l.paths.estuaryDir(), err)
	}
	if err := os.WriteFile(e.Values, values, 0o600); err != nil {
		return fmt.Errorf("write estuary values %s: %w", e.Values, err)
	}
	if err := l.stageEstuary(ctx, st); err != nil {
		return err
	}
	l.step("installing estuary: helm install %s %s --version %s -n %s -f %s", e.Release, e.Chart, e.ChartVersion, e.Namespace, e.Values)
	if err := l.helm(ctx, e, "upgrade", "--install", e.Release, e.Chart, "--version", e.ChartVersion, "--plain-http",
		"--namespace", e.Namespace, "--values", e.Values, "--timeout", "5m"); err != nil {
		return err
	}
	return l.awaitEstuary(ctx, st)
}

// stageEstuary waits for every node to register, releases the checkout into
// the lab's registry and snapshots every node, so that an install can follow.
func (l *Lab) stageEstuary(ctx context.Context, st *State) error {
	e := st.Estuary
	l.step("waiting for %d nodes to register", len(l.plan.Nodes))
	if _, err := l.waitNodes(ctx, st.BinDir, false); err != nil {
		return err
	}
	l.step("registry %s (%s in the lab)", l.registryHostAddr(), l.registryLabAddr())
	if err := l.startRegistry(ctx, e.RegistryBin); err != nil {
		return err
	}
	if err := l.releaseToRegistry(ctx, e); err != nil {
		return err
	}
	l.step("snapshot of every node before the install (%s)", filepath.Dir(PreInstallSnapshotPath(l.paths.Root, "node")))
	return l.snapshotNodes(ctx)
}

// awaitEstuary waits for the daemon on every node, the manager and the
// default network, and records the install.
func (l *Lab) awaitEstuary(ctx context.Context, st *State) error {
	e := st.Estuary
	l.step("waiting for DaemonSet %s on every node and Deployment %s", estuaryDaemonSet, estuaryDeployment)
	for _, w := range []string{"daemonset/" + estuaryDaemonSet, "deployment/" + estuaryDeployment} {
		if err := l.rolloutStatus(ctx, st.BinDir, w); err != nil {
			return err
		}
	}
	// The manager's leader creates the default network from the chart's
	// bootstrap ConfigMap once it runs; pods started before would wait.
	l.step("waiting for the default network %s", strings.Join(l.plan.defaultNetworkObjects(), ", "))
	for _, o := range l.plan.defaultNetworkObjects() {
		if _, err := l.kubectl(ctx, st.BinDir, "wait", "--for=create", o, "--timeout=2m"); err != nil {
			return fmt.Errorf("the manager did not create the default network: %w", err)
		}
	}
	e.InstalledAt = time.Now()
	return st.save(l.paths.StateFile())
}

// helm runs the checkout's helm against the lab, keeping helm's files in the state
// directory.
func (l *Lab) helm(ctx context.Context, e *EstuaryState, args ...string) error {
	cmd := exec.CommandContext(ctx, e.Helm, append(args, "--kubeconfig", l.paths.Kubeconfig())...) //nolint:gosec // G204: runs programs the lab located itself
	cmd.Env = append(os.Environ(), l.helmEnv()...)
	out, err := cmd.CombinedOutput()
	logPath := l.paths.Log("helm")
	_ = os.WriteFile(logPath, out, 0o600)
	if err != nil {
		return fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
	}
	return nil
}

// helmEnv keeps helm's cache, configuration and data in the state directory.
func (l *Lab) helmEnv() []string {
	home := filepath.Join(l.paths.estuaryDir(), "helm")
	return []string{"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
}

// rolloutStatus waits for a workload in the estuary namespace. It gives up early
// when a pod of the install stays in a state that does not fix itself (see
// stuckPods); the error then shows the namespace's pods, the reason, and the last
// log lines of the pods not ready.
func (l *Lab) rolloutStatus(ctx context.Context, bin, workload string) error {
	seen := map[string]int{}
	for {
		_, err := l.kubectl(ctx, bin, "rollout", "status", workload, "-n", EstuaryNamespace, "--timeout", "15s")
		if err == nil {
			return nil
		}
		stuck := l.stuckPods(ctx, bin, seen)
		if ctx.Err() == nil && stuck == "" {
			continue
		}
		if stuck != "" {
			err = errors.New(stuck)
		}
		diag, _ := l.kubectl(context.WithoutCancel(ctx), bin, "get", "pods", "-n", EstuaryNamespace, "-o", "wide")
		logs := l.unreadyLogs(context.WithoutCancel(ctx), bin)
		return fmt.Errorf("%s in %s did not become ready: %w\n%s%s", workload, EstuaryNamespace, err, diag, logs)
	}
}

// stuckReasons are container waiting reasons that retrying does not fix.
var stuckReasons = map[string]bool{
	"CreateContainerError": true, "CreateContainerConfigError": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CrashLoopBackOff": true, "RunContainerError": true,
}

// stuckPodChecks is how many consecutive checks (about 15s apart) a pod may wait
// for a stuck reason before the install is given up.
const stuckPodChecks = 4

// stuckPods returns a description of a pod of the install whose container has
// waited for one of stuckReasons in the last stuckPodChecks checks (counted in seen).
func (l *Lab) stuckPods(ctx context.Context, bin string, seen map[string]int) string {
	out, err := l.kubectl(ctx, bin, "get", "pods", "-n", EstuaryNamespace, "-l", "app.kubernetes.io/part-of=estuary",
		"-o", `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.containerStatuses[0].state.waiting.reason}{"\t"}{.status.containerStatuses[0].state.waiting.message}{"\n"}{end}`)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) < 2 || !stuckReasons[f[1]] {
			if len(f) > 0 {
				delete(seen, f[0])
			}
			continue
		}
		if seen[f[0]]++; seen[f[0]] >= stuckPodChecks {
			msg := ""
			if len(f) == 3 {
				msg = f[2]
			}
			return fmt.Sprintf("pod %s: %s: %s", f[0], f[1], msg)
		}
	}
	return ""
}

// unreadyLogs returns the last log lines of every estuary pod that is not ready.
func (l *Lab) unreadyLogs(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := l.kubectl(ctx, bin, "get", "pods", "-n", EstuaryNamespace, "-l", "app.kubernetes.io/part-of=estuary",
		"-o", `jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].ready}{"\n"}{end}`)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (len(f) == 2 && f[1] == "true") {
			continue
		}
		logs, _ := l.kubectl(ctx, bin, "logs", "-n", EstuaryNamespace, f[0], "--tail", "15", "--all-containers")
		fmt.Fprintf(&b, "--- %s:\n%s\n", f[0], strings.TrimSpace(logs))
	}
	return b.String()
}

// ExportImages builds estuary's images and writes them to dir as
// estuary-manager.tar and estuary-daemon.tar (for `ctr -n k8s.io images import`),
// with values-images.yaml setting the chart's image repositories and tags.
func (l *Lab) ExportImages(dir string) (images.Estuary, error) {
	repo, err := l.repoDir()
	if err != nil {
		return images.Estuary{}, err
	}
	img, err := images.BuildEstuary(repo, filepath.Join(l.opts.CacheDir, "lab", "images"))
	if err != nil {
		return images.Estuary{}, err
	}
	for name, b := range map[string]images.Built{"estuary-manager.tar": img.Manager, "estuary-daemon.tar": img.Daemon} {
		if err := copyFile(b.Archive, filepath.Join(dir, name), 0o644); err != nil {
			return images.Estuary{}, err
		}
	}
	values, err := yaml.Marshal(map[string]any{
		"manager": map[string]any{"image": map[string]any{"repository": img.Manager.Repository(), "tag": img.Manager.Version()}},
		"daemon":  map[string]any{"image": map[string]any{"repository": img.Daemon.Repository(), "tag": img.Daemon.Version()}},
	})
	if err != nil {
		return images.Estuary{}, fmt.Errorf("encode image values: %w", err)
	}
	p := filepath.Join(dir, "values-images.yaml")
	if err := os.WriteFile(p, values, 0o644); err != nil { //nolint:gosec // G306: a build output meant to be shared
		return images.Estuary{}, fmt.Errorf("write %s: %w", p, err)
	}
	return img, nil
}

// checkout is a checkout's version, commit and commit date.
type checkout struct {
	version, commit string
	created         time.Time
}

// checkoutVersion reads hack/version.sh: the version make build stamps, the
// commit and its date. Outside a git checkout the date is now.
func checkoutVersion(repo string) (checkout, error) {
	script := filepath.Join(repo, "hack", "version.sh")
	out, err := exec.Command("bash", script).Output() //nolint:gosec // G204: the checkout's own script
	if err != nil {
		return checkout{}, fmt.Errorf("%s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		return checkout{}, fmt.Errorf("%s printed %q, want version, commit and date", script, out)
	}
	c := checkout{version: lines[0], commit: lines[1]}
	if c.created, err = time.Parse(time.RFC3339, lines[2]); err != nil {
		c.created = time.Now().UTC()
	}
	return c, nil
}

// releaseToRegistry releases the checkout into the lab's registry for this
// machine's platform, as make release does but built with the faultinject
// tag (the manager's and daemon's --fault-* flags the fault tests use), and
// records the images.
func (l *Lab) releaseToRegistry(ctx context.Context, e *EstuaryState) error {
	l.step("make release VERSION=%s REGISTRY=%s (linux/%s)", e.ChartVersion, e.Registry, runtime.GOARCH)
	p := []release.Platform{{OS: "linux", Arch: runtime.GOARCH}}
	r, err := release.Run(ctx, release.Options{
		Version: e.ChartVersion, Registry: release.Registry{Name: e.Registry}, Repo: e.Repo,
		Out: filepath.Join(l.paths.estuaryDir(), "release"), Helm: release.Helm{Bin: e.Helm, Env: l.helmEnv()},
		Commit: e.Commit, Created: e.Created, ImagePlatforms: p, PluginPlatforms: p, Log: prefixWriter{l.p},
		Tags: []string{faultinject.BuildTag},
	})
	if err != nil {
		return fmt.Errorf("release %s to the lab registry: %w", e.ChartVersion, err)
	}
	e.Images, e.Chart = r.Images, r.ChartRef
	return nil
}
