//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
)

// The install the tests run against (charts/estuary on `up --cni estuary`).
const (
	nodeCount     = 3
	apiPort       = "16445"
	systemNS      = "kube-system"
	daemonSet     = "estuary-daemon"
	daemonName    = "estuary-daemon"
	daemonCtr     = "daemon"
	managerDeploy = "estuary-manager"
	managerName   = "estuary-manager"
	nameLabel     = "app.kubernetes.io/name"
	overlaySubnet = "overlay-v4"
	vxlanDevice   = "estvx4"
	podTable      = "1000"
	vethPrefix    = "est"
	httpPort      = 8080
	udpPort       = 8081
	externalPort  = 8080
)

// labEnv is the running lab: how to drive it and what it looks like.
type labEnv struct {
	bin, repo, tmp, state string
	reused, keep          bool
	kubeconfig            string
	estuary               *lab.EstuaryState // how the lab installed estuary

	c             client.Client
	nodes         []string
	nodeAddr      map[string]string // node -> underlay address
	nodeNetns     map[string]string // node -> host path of its network namespace
	externalAddr  string
	externalNetns string
	controlNetns  string // host path of the control plane's network namespace (API server, registry)
	routerAddr    string // the router's address on the switch, the lab's BGP peer

	// family is the lab's IP family (ipv4, dual or ipv6), from
	// ESTUARY_E2E_IP_FAMILY when the tests bring the lab up; families is its
	// address plan per family, the first family first.
	family   string
	families []lab.FamilyStatus

	// kubeadm is set when kubeadm made the lab's cluster (ESTUARY_E2E_BOOTSTRAP=kubeadm).
	kubeadm *lab.KubeadmState
	// cni is the lab's CNI: estuary, or hybridnet (ESTUARY_E2E_CNI).
	cni       string
	hybridnet *lab.HybridnetState
}

// cniEnv chooses the CNI of the lab the tests bring up: estuary (unset), or
// hybridnet (make test-hybridnet, whose tests skip on any other lab and
// every other test fails on it).
const cniEnv = "ESTUARY_E2E_CNI"

// labCNI is the CNI the tests want.
func labCNI() string {
	if c := os.Getenv(cniEnv); c != "" {
		return c
	}
	return "estuary"
}

// bootstrapEnv chooses how the lab the tests bring up is made: by the lab
// itself (unset) or by kubeadm (make test-kubeadm).
const bootstrapEnv = "ESTUARY_E2E_BOOTSTRAP"

// familyEnv chooses the IP family of the lab the tests bring up: make test
// runs the suite on an IPv4 lab, then its dual-stack subset on a dual lab.
const familyEnv = "ESTUARY_E2E_IP_FAMILY"

// needFamily returns the lab, or skips the test unless the lab is of family fam.
func needFamily(t *testing.T, fam string) *labEnv {
	t.Helper()
	e := needLab(t)
	if e.family != fam {
		t.Skipf("needs a %s lab (%s=%s; make test runs these in its dual-stack phase); this lab is %s", fam, familyEnv, fam, e.family)
	}
	return e
}

// ipv6 is the lab's IPv6 address plan; it fails the test on a lab without IPv6.
func (e *labEnv) ipv6(t *testing.T) lab.FamilyStatus {
	t.Helper()
	for _, f := range e.families {
		if f.Family == "IPv6" {
			return f
		}
	}
	t.Fatalf("the %s lab has no IPv6 addresses", e.family)
	return lab.FamilyStatus{}
}

// The lab starts at the first test that needs one (needLab), so a run of
// tests that need none (the pure ones of this package) brings up no lab and
// takes down no other lab on the machine.
var (
	labOnce    sync.Once
	env        *labEnv
	labErr     error
	skipReason string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		skipReason = "the estuary e2e tests need root (they build a lab of network namespaces, mounts and cgroups)"
		return m.Run()
	}
	ctrllog.SetLogger(logr.Discard())
	defer func() {
		if env != nil {
			env.stop()
		}
	}()
	return m.Run()
}

// needLab returns the lab, bringing it up at the first call, or skips the
// test when there can be none. A lab that failed to come up fails every test
// that needs it.
func needLab(t *testing.T) *labEnv {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	labOnce.Do(func() { env, labErr = startLab() })
	if labErr != nil {
		t.Fatalf("e2e: the lab: %v", labErr)
	}
	return env
}

func startLab() (*labEnv, error) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "estuary-e2e-")
	if err != nil {
		return nil, err
	}
	e := &labEnv{repo: repo, tmp: tmp, bin: filepath.Join(tmp, "estuary-lab"), keep: os.Getenv("ESTUARY_E2E_KEEP") == "1"}
	if err := e.build(); err != nil {
		return e, err
	}
	if s := os.Getenv("ESTUARY_E2E_REUSE"); s != "" {
		e.state, e.reused = s, true
	} else {
		e.state = filepath.Join(tmp, "state")
		if err := e.up(); err != nil {
			return e, err
		}
	}
	if err := e.load(); err != nil {
		return e, err
	}
	return e, e.waitInstall()
}

func (e *labEnv) build() error {
	cmd := exec.Command("go", "build", "-o", e.bin, "./cmd/estuary-lab")
	cmd.Dir = e.repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build estuary-lab: %w\n%s", err, out)
	}
	return nil
}

func (e *labEnv) labArgs(a ...string) []string {
	return append([]string{"--state-dir", e.state}, a...)
}

func (e *labEnv) up() error {
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute) // a first up may build every binary
	defer cancel()
	args := e.labArgs("up", "--cni", labCNI(), "--nodes", fmt.Sprint(nodeCount), "--api-port", apiPort, "--repo", e.repo)
	if f := os.Getenv(familyEnv); f != "" {
		args = append(args, "--ip-family", f)
	}
	// make test-kubeadm runs the suite on a cluster kubeadm made.
	if b := os.Getenv(bootstrapEnv); b != "" {
		args = append(args, "--bootstrap", b)
	}
	// make test-kube-version runs the suite on another Kubernetes version.
	if v := os.Getenv("ESTUARY_E2E_KUBERNETES_VERSION"); v != "" {
		args = append(args, "--kubernetes-version", v)
	}
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Dir = e.repo
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("estuary-lab %s: %w", strings.Join(args, " "), err)
	}
	fmt.Printf("e2e: lab up in %.1fs\n", time.Since(start).Seconds())
	return nil
}

// stop removes the lab the tests brought up, unless it is reused or kept.
func (e *labEnv) stop() {
	switch {
	case e.reused:
	case e.keep:
		fmt.Fprintf(os.Stderr, "e2e: lab kept: ESTUARY_E2E_REUSE=%s reuses it; %s --state-dir %s down removes it\n", e.state, e.bin, e.state)
		return
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, e.bin, e.labArgs("down")...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: estuary-lab down: %v\n%s", err, out)
		}
	}
	_ = os.RemoveAll(e.tmp)
}

// load reads the lab's status and connects to its API server.
func (e *labEnv) load() error {
	out, err := exec.Command(e.bin, e.labArgs("status", "-o", "json")...).Output()
	if err != nil {
		return fmt.Errorf("estuary-lab status: %w", err)
	}
	var s lab.Status
	if err := json.Unmarshal(out, &s); err != nil {
		return fmt.Errorf("parse estuary-lab status: %w", err)
	}
	if s.Phase != "running" || s.CNI != labCNI() || len(s.Nodes) < nodeCount {
		return fmt.Errorf("lab at %s: phase %q, CNI %q, %d nodes; want running, %s, %d nodes", e.state, s.Phase, s.CNI, len(s.Nodes), labCNI(), nodeCount)
	}
	e.cni, e.hybridnet = s.CNI, s.Hybridnet
	e.nodeAddr, e.nodeNetns = map[string]string{}, map[string]string{}
	for _, n := range s.Nodes {
		e.nodes = append(e.nodes, n.Name)
		e.nodeAddr[n.Name] = n.Address
		e.nodeNetns[n.Name] = netnsPath(n.Namespace)
	}
	e.externalAddr, e.externalNetns = s.External.Address, netnsPath(s.External.Namespace)
	e.controlNetns = netnsPath(s.ControlPlane.Namespace)
	e.routerAddr = s.Router.Address
	e.family, e.families = s.IPFamily, s.Families
	if f := os.Getenv(familyEnv); f != "" && !e.reused && f != e.family {
		return fmt.Errorf("lab at %s is %s; %s asked for %s", e.state, e.family, familyEnv, f)
	}
	if b := os.Getenv(bootstrapEnv); b != "" && b != s.Bootstrap {
		return fmt.Errorf("lab at %s was made by %s; %s asked for %s", e.state, s.Bootstrap, bootstrapEnv, b)
	}
	e.kubeadm = s.Kubeadm
	e.kubeconfig = s.Kubeconfig
	e.estuary = s.Estuary
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", s.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := estuaryv1.AddToScheme(scheme); err != nil {
		return err
	}
	e.c, err = client.New(cfg, client.Options{Scheme: scheme})
	return err
}

// waitInstall waits for every node, the daemon on every node, the manager
// and the default overlay subnet.
func (e *labEnv) waitInstall() error {
	if e.cni != "estuary" { // the lab waited for its CNI's own install
		return nil
	}
	return waitFor("estuary installed and ready on the lab", 5*time.Minute, func(ctx context.Context) error {
		var nodes corev1.NodeList
		if err := e.c.List(ctx, &nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if !nodeReady(&n) {
				return fmt.Errorf("node %s is not Ready", n.Name)
			}
		}
		var ds appsv1.DaemonSet
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: daemonSet}, &ds); err != nil {
			return fmt.Errorf("daemonset %s/%s: %w", systemNS, daemonSet, err)
		}
		if ds.Status.DesiredNumberScheduled < nodeCount || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
			return fmt.Errorf("daemonset %s: %d of %d ready", daemonSet, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
		var dep appsv1.Deployment
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerDeploy}, &dep); err != nil {
			return fmt.Errorf("deployment %s/%s: %w", systemNS, managerDeploy, err)
		}
		if dep.Status.AvailableReplicas < 1 {
			return fmt.Errorf("deployment %s has no available replica", managerDeploy)
		}
		for _, name := range e.defaultSubnets() {
			var sn estuaryv1.Subnet
			if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &sn); err != nil {
				return fmt.Errorf("subnet %s: %w", name, err)
			}
		}
		return nil
	})
}

// defaultSubnets are the default network's subnets the lab installs: one
// per IP family of the lab (overlay-v4, overlay-v6).
func (e *labEnv) defaultSubnets() []string {
	switch e.family {
	case "ipv6":
		return []string{"overlay-v6"}
	case "dual":
		return []string{overlaySubnet, "overlay-v6"}
	}
	return []string{overlaySubnet}
}

// netnsPath is the path of a lab namespace the status names.
func netnsPath(ns string) string {
	if filepath.IsAbs(ns) {
		return ns
	}
	return netlab.Path(ns)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
