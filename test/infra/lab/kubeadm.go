package lab

// The kubeadm bootstrap (`up --bootstrap kubeadm`).
//
// Design: the lab's nodes are made as for any lab (network namespace, mount
// namespace, containerd with preloaded images), but no control plane runs as
// host processes and the lab starts no kubelet or kube-proxy of its own.
// Instead kubeadm, built from the module proxy at the lab's Kubernetes version,
// runs inside the nodes exactly as on separate machines: `kubeadm init` on
// node-1 (static-pod control plane, kube-proxy DaemonSet, CoreDNS Deployment,
// bootstrap token, control-plane taint) and `kubeadm join` on the others.
//
// The commands are the install guide's (docs/install.md, the blocks marked
// lab-runs, see installdoc.go), expanded with the lab's values, followed by
// the flags this one machine needs and a real cluster would not: the node's
// name and address, the lab's Service range, the loopback address in the API
// server's certificate (the host reaches it through the lab's forwarder), a
// fixed token, the preflight checks that cannot pass inside a network
// namespace (kubeadmIgnoredPreflight, each with its reason), and kubeadm's
// own --patches for the kubelet settings of a shared machine
// (render.KubeletMachineSettings) and etcd without fsync.
//
// kubeadm expects systemd to run the kubelet with its drop-in
// (10-kubeadm.conf); the lab's kubeletUnit plays that part: it waits for the
// configuration and flags kubeadm writes and starts the kubelet with them.
// The control-plane images are the lab's own builds (images.Kubeadm), imported
// under the references `kubeadm config images list` prints, so no image is
// ever pulled. estuary is then installed with the guide's own commands from
// the lab's registry (installEstuaryFromDoc).

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/test/infra/lab/images"
	"github.com/estuary-cni/estuary/test/infra/lab/pki"
	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// errNoConfig: kube-proxy's ConfigMap holds no configuration to edit.
var errNoConfig = errors.New("empty")

// Bootstraps: how up makes the cluster.
const (
	BootstrapLab     = "lab"
	BootstrapKubeadm = "kubeadm"
)

// KubeadmState records a kubeadm-made lab.
type KubeadmState struct {
	Init   []string `json:"init"`   // the kubeadm init run on the first node
	Join   []string `json:"join"`   // the kubeadm join run on the others, the token shown as <token>
	Images []string `json:"images"` // control-plane images preloaded on every node
	// Steps are the install guide's steps the lab ran, in order.
	Steps []string `json:"steps"`
	// Before estuary's install: nodes Ready and CoreDNS replicas ready.
	NodesReadyBeforeInstall   int `json:"nodesReadyBeforeInstall"`
	CoreDNSReadyBeforeInstall int `json:"coreDNSReadyBeforeInstall"`
}

// kubeadmIgnoredPreflight are the preflight checks the lab lets fail, and why.
var kubeadmIgnoredPreflight = map[string]string{
	// kubeadm reads the kernel's configuration and refuses cgroup v1; the
	// kubelet runs on it with failCgroupV1: false.
	"SystemVerification": "cgroup v1 host",
	// The bridge netfilter sysctl does not exist inside a network namespace
	// unless br_netfilter is loaded, and no lab traffic needs it.
	"FileContent--proc-sys-net-bridge-bridge-nf-call-iptables": "no br_netfilter in the node's namespace",
	// The machine has swap; every node's kubelet runs with failSwapOn: false.
	"Swap": "the machine's swap",
}

func (l *Lab) kubeadm() bool { return l.opts.Bootstrap == BootstrapKubeadm }

// checkBootstrap validates --bootstrap against the other options.
func (l *Lab) checkBootstrap() error {
	switch l.opts.Bootstrap {
	case BootstrapLab:
		return nil
	case BootstrapKubeadm:
		if l.opts.CNI != "estuary" {
			return fmt.Errorf("--bootstrap kubeadm: installs estuary from docs/install.md; want --cni estuary, not %q", l.opts.CNI)
		}
		if l.opts.IPFamily != FamilyIPv4 {
			return fmt.Errorf("--bootstrap kubeadm: only --ip-family %s is supported", FamilyIPv4)
		}
		if l.opts.ProxyMode != "iptables" {
			return fmt.Errorf("--bootstrap kubeadm: kube-proxy runs in kubeadm's default mode (iptables); --proxy-mode %q is not supported", l.opts.ProxyMode)
		}
		return nil
	default:
		return fmt.Errorf("--bootstrap %q: want %s or %s", l.opts.Bootstrap, BootstrapLab, BootstrapKubeadm)
	}
}

// kubeadmImages lists the images kubeadm deploys and builds them.
func (l *Lab) kubeadmImages(repo, cache, bin string) (refs, archives []string, err error) {
	pause, err := images.BuildPause(filepath.Join(repo, "hack", "images", "pause"), cache)
	if err != nil {
		return nil, nil, err
	}
	out, err := exec.Command(filepath.Join(bin, "kubeadm"), "config", "images", "list", //nolint:gosec // G204: runs programs the lab located itself
		"--kubernetes-version", l.opts.KubernetesVersion).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeadm config images list: %w", err)
	}
	refs = strings.Fields(string(out))
	archives, err = images.Kubeadm(cache, bin, pause, refs)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeadm's images: %w", err)
	}
	return refs, archives, nil
}

// kubeadmCluster runs kubeadm init on the first node and kubeadm join on the
// others, each with its kubelet unit, then lets the host reach the API server.
func (l *Lab) kubeadmCluster(ctx context.Context, st *State, doc InstallDoc) error {
	token, err := bootstrapToken()
	if err != nil {
		return err
	}
	cp := l.plan.Nodes[0]
	vars := l.docVars(st)
	init, err := doc.Command(DocKubeadmInit, "kubeadm", vars)
	if err != nil {
		return err
	}
	init = append(init, l.kubeadmNodeFlags(cp, true)...)
	init = append(init, "--apiserver-advertise-address="+cp.Addr.String(), "--apiserver-cert-extra-sans=127.0.0.1",
		"--service-cidr="+l.plan.Services.String(), "--kubernetes-version="+l.opts.KubernetesVersion, "--token="+token)
	st.Kubeadm.Init = redact(init, token)
	l.step("%s: %s", cp.Name, strings.Join(st.Kubeadm.Init, " "))
	if err := l.kubeadmOnNode(ctx, st, cp, "init", init); err != nil {
		return err
	}
	if err := l.kubeadmAdminKubeconfig(cp); err != nil {
		return err
	}
	if _, err := l.startForwarder(cp.NetNS, cp.Addr); err != nil {
		return err
	}
	if err := l.kubeProxyKeepsConntrack(ctx, st.BinDir); err != nil {
		return err
	}
	hash, err := caCertHash(filepath.Join(l.paths.Node(cp.Name), "etc-kubernetes", "pki", "ca.crt"))
	if err != nil {
		return err
	}
	vars["CONTROL_PLANE"], vars["TOKEN"], vars["CA_CERT_HASH"] = cp.Addr.String(), token, hash
	join, err := doc.Command(DocKubeadmJoin, "kubeadm", vars)
	if err != nil {
		return err
	}
	st.Kubeadm.Join = redact(join, token)
	if err := l.kubeadmJoinAll(ctx, st, join, token); err != nil {
		return err
	}
	// Every lab node runs workloads, the control plane's too (kubeadm's
	// "control plane node isolation", lifted as its documentation shows).
	if _, err := l.kubectl(ctx, st.BinDir, "taint", "nodes", cp.Name, "node-role.kubernetes.io/control-plane:NoSchedule-"); err != nil {
		return err
	}
	// kube-proxy runs on every node before any CNI, as on a fresh kubeadm
	// cluster; the pre-install snapshot then holds what it set.
	l.step("waiting for kubeadm's kube-proxy DaemonSet on every node")
	return l.rolloutStatus(ctx, st.BinDir, "daemonset/kube-proxy")
}

func (l *Lab) kubeadmJoinAll(ctx context.Context, st *State, join []string, token string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.plan.Nodes))
	for i, n := range l.plan.Nodes[1:] {
		argv := append(append([]string{}, join...), l.kubeadmNodeFlags(n, false)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.step("%s: %s", n.Name, strings.Join(redact(argv, token), " "))
			errs[i] = l.kubeadmOnNode(ctx, st, n, "join", argv)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// kubeadmNodeFlags are the flags of init and join for one lab node.
func (l *Lab) kubeadmNodeFlags(m Member, controlPlane bool) []string {
	ignored := make([]string, 0, len(kubeadmIgnoredPreflight))
	for c := range kubeadmIgnoredPreflight {
		ignored = append(ignored, c)
	}
	return []string{"--node-name=" + m.Name, "--patches=" + l.kubeadmPatchDir(m, controlPlane),
		"--ignore-preflight-errors=" + strings.Join(ignored, ",")}
}

func (l *Lab) kubeadmPatchDir(m Member, _ bool) string {
	return filepath.Join(l.paths.Node(m.Name), "kubeadm-patches")
}

// writeKubeadmPatches writes the node's kubeadm patches: the kubelet settings
// of a shared machine and, on the control plane, etcd without fsync.
func (l *Lab) writeKubeadmPatches(m Member, controlPlane bool) error {
	dir := l.kubeadmPatchDir(m, controlPlane)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	files := map[string]any{"kubeletconfiguration+merge.json": render.KubeletMachineSettings("/" + cgroupOf(m.Name))}
	if controlPlane {
		files["etcd+json.json"] = []map[string]string{{"op": "add", "path": "/spec/containers/0/command/-", "value": "--unsafe-no-fsync"}}
	}
	for name, v := range files {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// kubeadmOnNode runs one kubeadm command in the node while its kubelet unit
// waits for what kubeadm writes; both must succeed.
func (l *Lab) kubeadmOnNode(ctx context.Context, st *State, m Member, what string, argv []string) error {
	if err := l.writeKubeadmPatches(m, what == "init"); err != nil {
		return err
	}
	argv[0] = filepath.Join(st.BinDir, "kubeadm")
	cmd, err := l.Command(m.Name, argv)
	if err != nil {
		return err
	}
	logPath := l.paths.Log(m.Name + "-kubeadm-" + what)
	log, err := os.Create(filepath.Clean(logPath))
	if err != nil {
		return fmt.Errorf("create %s: %w", logPath, err)
	}
	defer func() { _ = log.Close() }()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, log, log
	// kubeadm runs `kubelet --version`, as on a node where the kubelet is installed.
	cmd.Env = append(cmd.Env, "PATH="+st.BinDir+":"+os.Getenv("PATH"))
	unitCtx, stopUnit := context.WithCancel(ctx)
	defer stopUnit()
	unit := make(chan error, 1)
	go func() { unit <- l.kubeletUnit(unitCtx, m, st.BinDir) }()
	if err := runContext(ctx, cmd); err != nil {
		return fmt.Errorf("%s: kubeadm %s: %w; last lines of %s:\n%s", m.Name, what, err, logPath, lastLines(readFile(logPath), 15))
	}
	if err := <-unit; err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	return nil
}

// runContext runs cmd, killing it when ctx ends first.
func runContext(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return errors.Join(ctx.Err(), <-done)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(filepath.Clean(p))
	return string(b)
}

// kubeletUnit does for a kubeadm node what kubeadm's systemd drop-in
// (10-kubeadm.conf) does: once kubeadm has written the kubelet's
// configuration and flags, it runs the kubelet with
// $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS
// $KUBELET_EXTRA_ARGS, the last being the node's address on the switch.
func (l *Lab) kubeletUnit(ctx context.Context, m Member, bin string) error {
	dir := filepath.Join(l.paths.Node(m.Name), "var-lib-kubelet")
	var kubeadmArgs []string
	for {
		var err error
		if kubeadmArgs, err = kubeadmKubeletArgs(dir); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubelet unit: kubeadm never wrote the kubelet's configuration (%w): %w", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	argv := append([]string{filepath.Join(bin, "kubelet"),
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml"}, kubeadmArgs...)
	argv = append(argv, "--node-ip="+l.plan.nodeIPFlag(m.Name), "--v=1")
	s := l.spec(m.Name+"-kubelet", l.nodeCgroup(m), "", argv...)
	s.JoinPID = l.holder(m.Name)
	_, err := l.start(s)
	return err
}

// kubeadmKubeletArgs reads KUBELET_KUBEADM_ARGS once kubeadm has written both
// kubeadm-flags.env and a whole config.yaml in dir.
func kubeadmKubeletArgs(dir string) ([]string, error) {
	cfg, err := os.ReadFile(filepath.Clean(filepath.Join(dir, "config.yaml")))
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(cfg), "kind: KubeletConfiguration") {
		return nil, fmt.Errorf("config.yaml incomplete")
	}
	env, err := os.ReadFile(filepath.Clean(filepath.Join(dir, "kubeadm-flags.env")))
	if err != nil {
		return nil, err
	}
	return ParseKubeadmFlagsEnv(string(env))
}

// ParseKubeadmFlagsEnv returns the words of KUBELET_KUBEADM_ARGS="..." in
// kubeadm's kubeadm-flags.env.
func ParseKubeadmFlagsEnv(env string) ([]string, error) {
	for _, line := range strings.Split(env, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "KUBELET_KUBEADM_ARGS=")
		if !ok {
			continue
		}
		if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return nil, fmt.Errorf("kubeadm-flags.env: KUBELET_KUBEADM_ARGS not quoted whole: %q", v)
		}
		return strings.Fields(v[1 : len(v)-1]), nil
	}
	return nil, fmt.Errorf("kubeadm-flags.env: no KUBELET_KUBEADM_ARGS")
}

// kubeadmAdminKubeconfig publishes kubeadm's admin.conf: with the control
// plane's address for use inside the lab, and with the host forwarder's for
// the host.
func (l *Lab) kubeadmAdminKubeconfig(cp Member) error {
	src := filepath.Join(l.paths.Node(cp.Name), "etc-kubernetes", "admin.conf")
	inLab := "https://" + netip.AddrPortFrom(cp.Addr, APIServerPort).String()
	if err := pki.RewriteServer(src, filepath.Join(l.paths.ControlPlane(), "admin.kubeconfig"), inLab); err != nil {
		return fmt.Errorf("kubeadm's admin kubeconfig: %w", err)
	}
	return pki.RewriteServer(src, l.paths.Kubeconfig(), fmt.Sprintf("https://127.0.0.1:%d", l.opts.HostAPIPort))
}

// kubeProxyKeepsConntrack edits the kube-proxy configuration kubeadm
// published (ConfigMap kube-system/kube-proxy) so that kube-proxy leaves
// conntrack's table size as the kernel has it: nf_conntrack_max is global and
// read-only inside the nodes' network namespaces, and kube-proxy exits when
// it cannot raise it. kube-proxy's pods started before are restarted.
func (l *Lab) kubeProxyKeepsConntrack(ctx context.Context, bin string) error {
	out, err := l.kubectl(ctx, bin, "-n", "kube-system", "get", "configmap", "kube-proxy", "-o", "json")
	if err != nil {
		return err
	}
	var cm map[string]any
	if err := json.Unmarshal([]byte(out), &cm); err != nil {
		return fmt.Errorf("parse configmap kube-proxy: %w", err)
	}
	data, _ := cm["data"].(map[string]any)
	conf, _ := data["config.conf"].(string)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(conf), &cfg); err != nil || cfg == nil {
		return fmt.Errorf("configmap kube-proxy: config.conf: not a configuration: %w", errors.Join(err, errNoConfig))
	}
	ct, _ := cfg["conntrack"].(map[string]any)
	if ct == nil {
		ct = map[string]any{}
	}
	ct["maxPerCore"], ct["min"] = 0, 0
	cfg["conntrack"] = ct
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode kube-proxy configuration: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"config.conf": string(b)}})
	if err != nil {
		return fmt.Errorf("encode configmap patch: %w", err)
	}
	if _, err := l.kubectl(ctx, bin, "-n", "kube-system", "patch", "configmap", "kube-proxy", "--type=merge", "-p", string(patch)); err != nil {
		return err
	}
	_, err = l.kubectl(ctx, bin, "-n", "kube-system", "delete", "pods", "-l", "k8s-app=kube-proxy", "--wait=false")
	return err
}

// bootstrapToken makes a kubeadm bootstrap token ([a-z0-9]{6}.[a-z0-9]{16}),
// as `kubeadm token generate` does.
func bootstrapToken() (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 22)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", fmt.Errorf("bootstrap token: %w", err)
		}
		b[i] = alphabet[n.Int64()]
	}
	return string(b[:6]) + "." + string(b[6:]), nil
}

// caCertHash is kubeadm's --discovery-token-ca-cert-hash of the CA at path:
// sha256 of its SubjectPublicKeyInfo.
func caCertHash(path string) (string, error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return "", fmt.Errorf("cluster CA: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", fmt.Errorf("cluster CA %s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("cluster CA %s: %w", path, err)
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// redact returns argv with secret replaced by <token>.
func redact(argv []string, secret string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, secret, "<token>")
	}
	return out
}
