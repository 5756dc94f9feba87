//go:build integration

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// addressTimeout is the daemon's --address-timeout in this test.
const addressTimeout = 3 * time.Second

// node is one running node daemon with its fake host namespace.
type node struct {
	k8s    client.Client
	host   string
	cfg    daemon.Config
	stop   func() error
	bin    string // the installed plugin
	stdin  []byte // the estuary plugin's config from the installed conflist
	health string
}

// TestNodePath runs API server, manager controllers, node daemon and the real
// plugin binary together: ADD plumbs a pod with the address the manager
// recorded, DEL removes it, and deleting the pod releases the address.
func TestNodePath(t *testing.T) {
	requirements(t)
	cfg, k8s := startAPIServer(t, false)
	startManager(t, cfg, k8s.Scheme())
	overlay(t, k8s, "it-overlay", "10.200.0.0/24")

	dir := t.TempDir()
	n := &node{k8s: k8s, host: fakeHost(t), health: freeAddr(t)}
	n.cfg = daemon.Config{
		NodeName:        nodeName,
		Kube:            cfg,
		SocketPath:      filepath.Join(dir, "run", "cni.sock"),
		StatePath:       filepath.Join(dir, "lib", "state.db"),
		CNIBinDir:       filepath.Join(dir, "opt", "cni", "bin"),
		CNIConfDir:      filepath.Join(dir, "etc", "cni", "net.d"),
		CNIBinarySource: buildCNI(t),
		AddressTimeout:  addressTimeout,
		HostNetns:       n.host,
		HealthAddr:      n.health,
	}
	n.stop = startDaemon(t, n.cfg)

	t.Run("installed", n.testInstalled)
	t.Run("healthy", n.testHealthy)
	t.Run("add del release", n.testAddDelRelease)
	t.Run("pod not served", n.testPodNotServed)
	t.Run("pod the manager cannot serve", n.testStarvedPodNamesManagersEvent)
	t.Run("state file lost", n.testStateFileLost)
	t.Run("stop", n.testStop)
	t.Run("restart", n.testRestart)
}

func (n *node) testInstalled(t *testing.T) {
	n.bin = filepath.Join(n.cfg.CNIBinDir, daemon.PluginType)
	want, err := os.ReadFile(n.cfg.CNIBinarySource)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(n.bin)
	if err != nil || string(got) != string(want) {
		t.Fatalf("installed binary %s differs from its source (%v)", n.bin, err)
	}
	raw, err := os.ReadFile(filepath.Join(n.cfg.CNIConfDir, daemon.ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	var list daemon.Conflist
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("conflist %s: %v", raw, err)
	}
	if list.CNIVersion != "1.1.0" || len(list.Plugins) != 2 || list.Plugins[0].Type != "estuary" ||
		list.Plugins[0].DaemonSocket != n.cfg.SocketPath || list.Plugins[1].Type != "portmap" ||
		!list.Plugins[1].Capabilities["portMappings"] {
		t.Fatalf("conflist = %s", raw)
	}
	if n.stdin, err = list.PluginConfig("estuary"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(n.cfg.SocketPath)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, %v; want a 0600 socket", n.cfg.SocketPath, fi, err)
	}
	var fwd string
	if err := nsrun.Do(n.host, func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		fwd = strings.TrimSpace(string(b))
		return err
	}); err != nil || fwd != "1" {
		t.Fatalf("ip_forward in the fake host = %q, %v; want 1", fwd, err)
	}
}

func (n *node) testHealthy(t *testing.T) {
	testenv.Eventually(t, "/healthz ok", 15*time.Second, func() error {
		resp, err := http.Get("http://" + n.health + "/healthz")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return nil
	})
}

func (n *node) call(command, id, netns string, p *corev1.Pod) cniCall {
	return cniCall{
		bin: n.bin, binDir: n.cfg.CNIBinDir, stdin: n.stdin, command: command,
		containerID: id, netns: netns, podNS: p.Namespace, podName: p.Name, podUID: string(p.UID),
	}
}

func (n *node) testAddDelRelease(t *testing.T) {
	p := newPod(t, n.k8s, "web-0")
	ipi := boundAddress(t, n.k8s, p)
	want := netip.MustParsePrefix(ipi.Spec.Address.IP).Addr()
	podNS := nstest.New(t)
	const id = "it-sandbox-1"

	o := n.call("ADD", id, podNS, p).run(t).ok(t, "ADD")
	res, err := types100.NewResult([]byte(o.stdout))
	if err != nil {
		t.Fatalf("ADD output %q: %v", o.stdout, err)
	}
	r := res.(*types100.Result)
	if len(r.IPs) != 1 || r.IPs[0].Address.IP.String() != want.String() {
		t.Fatalf("ADD result IPs = %v, want %s (the pod's ipinstance)", r.IPs, want)
	}
	contains(t, "pod addresses", ipCmd(t, podNS, "-o", "addr", "show", "dev", "eth0"), "inet "+want.String()+"/32")
	contains(t, "pod routes", ipCmd(t, podNS, "route", "show"), "default via 169.254.1.1 dev eth0")
	if err := nstest.UDPRoundTrip(n.host, want, podNS); err != nil {
		t.Fatalf("fake host -> pod: %v", err)
	}

	hostVeth := podnet.HostVethName(id, "eth0")
	ipCmd(t, n.host, "link", "show", hostVeth)
	n.call("DEL", id, podNS, p).run(t).ok(t, "DEL")
	if out, err := tryIP(n.host, "link", "show", hostVeth); err == nil {
		t.Fatalf("host veth %s still there after DEL:\n%s", hostVeth, out)
	}
	if out, err := tryIP(podNS, "link", "show", "eth0"); err == nil {
		t.Fatalf("pod eth0 still there after DEL:\n%s", out)
	}

	if err := n.k8s.Delete(bg(), p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "ipinstance released", 30*time.Second, func() error {
		list, err := instances(n.k8s, p)
		if err == nil && len(list) > 0 {
			err = fmt.Errorf("%d ipinstances left", len(list))
		}
		return err
	})
}

func (n *node) testPodNotServed(t *testing.T) {
	podNS := nstest.New(t)
	ghost := &corev1.Pod{}
	ghost.Namespace, ghost.Name, ghost.UID = "default", "ghost", "0b5e7c1e-0000-4000-8000-000000000001"
	if err := n.k8s.Get(bg(), client.ObjectKeyFromObject(ghost), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod default/ghost should not exist: %v", err)
	}
	o := n.call("ADD", "it-ghost", podNS, ghost).run(t)
	e := o.cniError(t)
	if !strings.Contains(e.Msg+" "+e.Details, "pod default/ghost") {
		t.Fatalf("ADD error = code %d %q %q, want one naming pod default/ghost", e.Code, e.Msg, e.Details)
	}
	if !strings.Contains(e.Msg, "timed out serving the request") {
		t.Errorf("ADD error message = %q, want it to say the daemon timed out (its own wait), not that it did not answer", e.Msg)
	}
	if !strings.Contains(e.Msg+" "+e.Details, "estuary-manager recorded no event for it") {
		t.Errorf("ADD error = %q %q, want it to say the manager recorded no event", e.Msg, e.Details)
	}
	t.Logf("ADD of an unserved pod: exit %d after %s: code %d %q: %s", o.exit, o.took.Round(time.Millisecond), e.Code, e.Msg, e.Details)
	if o.took < addressTimeout || o.took > addressTimeout+5*time.Second {
		t.Errorf("ADD failed after %s, want about the address timeout %s", o.took, addressTimeout)
	}
	if out := ipCmd(t, n.host, "-o", "link", "show"); strings.Contains(out, podnet.HostVethPrefix) {
		t.Errorf("failed ADD left a veth in the fake host:\n%s", out)
	}
	n.call("DEL", "it-ghost", podNS, ghost).run(t).ok(t, "DEL after failed ADD")
}

// testStarvedPodNamesManagersEvent: a pod naming a subnet that does not
// exist gets no address; the ADD's error carries the manager's event.
func (n *node) testStarvedPodNamesManagersEvent(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "starved",
			Annotations: map[string]string{estuaryv1.AnnotationSubnet: "no-such-subnet"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	if err := n.k8s.Create(bg(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.k8s.Delete(bg(), p) })
	podNS := nstest.New(t)
	e := n.call("ADD", "it-starved", podNS, p).run(t).cniError(t)
	n.call("DEL", "it-starved", podNS, p).run(t).ok(t, "DEL after failed ADD")
	msg := e.Msg + " " + e.Details
	if !strings.Contains(msg, "estuary-manager's last event for it: Warning AllocationFailed") ||
		!strings.Contains(msg, "no-such-subnet") {
		t.Fatalf("ADD error = %q, want the manager's AllocationFailed event naming subnet no-such-subnet", msg)
	}
	t.Logf("ADD of a pod the manager cannot serve: %s", msg)
}

// testStateFileLost: a pod is plumbed; the daemon is stopped and its
// state file deleted, then (second round) overwritten with garbage. Each
// time the restarted daemon starts, keeps the pod's data path (its host
// veth, its local-pods route, traffic), moves the damaged file aside, and
// knows the endpoint again, so a DEL then removes it.
func (n *node) testStateFileLost(t *testing.T) {
	p := newPod(t, n.k8s, "kept-0")
	ipi := boundAddress(t, n.k8s, p)
	addr := netip.MustParsePrefix(ipi.Spec.Address.IP).Addr()
	podNS := nstest.New(t)
	const id = "it-sandbox-kept"
	n.call("ADD", id, podNS, p).run(t).ok(t, "ADD")
	hostVeth := podnet.HostVethName(id, "eth0")
	for round, lose := range []func() error{
		func() error { return os.Remove(n.cfg.StatePath) },
		func() error {
			return os.WriteFile(n.cfg.StatePath, []byte("not a state file, clearly damaged....."), 0o600)
		},
	} {
		if err := n.stop(); err != nil {
			t.Fatalf("round %d: daemon stopped with %v", round, err)
		}
		if err := lose(); err != nil {
			t.Fatal(err)
		}
		n.stop = startDaemon(t, n.cfg)
		n.testHealthy(t)
		contains(t, "local-pods route", ipCmd(t, n.host, "route", "show", "table", "1000"), addr.String()+" dev "+hostVeth)
		if err := nstest.UDPRoundTrip(n.host, addr, podNS); err != nil {
			t.Fatalf("round %d: fake host -> pod after the state file was lost: %v", round, err)
		}
		eps := n.endpoints(t)
		if len(eps) != 1 || eps[0].ContainerID != id || eps[0].PodName != p.Name || eps[0].PodUID != string(p.UID) ||
			len(eps[0].IPs) != 1 || eps[0].IPs[0] != addr.String()+"/32" {
			t.Fatalf("round %d: endpoints after the restart = %+v", round, eps)
		}
	}
	if aside, _ := filepath.Glob(n.cfg.StatePath + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("damaged state files kept aside: %v, want 1", aside)
	}
	n.call("DEL", id, podNS, p).run(t).ok(t, "DEL")
	if out, err := tryIP(n.host, "link", "show", hostVeth); err == nil {
		t.Fatalf("host veth %s still there after DEL:\n%s", hostVeth, out)
	}
	if err := n.k8s.Delete(bg(), p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// endpoints lists the endpoints in the daemon's state file, read from a
// copy: the running daemon holds the file's lock.
func (n *node) endpoints(t *testing.T) []endpointstore.Endpoint {
	t.Helper()
	b, err := os.ReadFile(n.cfg.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := endpointstore.Open(cp)
	if err != nil {
		t.Fatalf("open a copy of the state file: %v", err)
	}
	defer func() { _ = s.Close() }()
	eps, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	return eps
}

func (n *node) testStop(t *testing.T) {
	if err := n.stop(); err != nil {
		t.Fatalf("daemon stopped with %v", err)
	}
	if _, err := os.Stat(n.cfg.SocketPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket after stop: %v, want it removed", err)
	}
	s, err := endpointstore.Open(n.cfg.StatePath)
	if err != nil {
		t.Fatalf("state db after stop: %v (still held open?)", err)
	}
	eps, err := s.List()
	if err != nil || len(eps) != 0 {
		t.Errorf("endpoints after DELs = %v, %v; want none", eps, err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// testRestart starts a second daemon on the same paths: it finds its
// installation in place and does not rewrite it, and serves again.
func (n *node) testRestart(t *testing.T) {
	conflist := filepath.Join(n.cfg.CNIConfDir, daemon.ConflistName)
	before := []os.FileInfo{stat(t, n.bin), stat(t, conflist)}
	stop := startDaemon(t, n.cfg)
	n.testHealthy(t)
	for i, path := range []string{n.bin, conflist} {
		if after := stat(t, path); !os.SameFile(before[i], after) || !after.ModTime().Equal(before[i].ModTime()) {
			t.Errorf("%s was rewritten by the restarted daemon", path)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("restarted daemon stopped with %v", err)
	}
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
