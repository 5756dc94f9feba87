//go:build integration

package integration

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// pinnedMAC is the MAC the test writes into a pod's records, as the
// manager does for a pod whose MAC is fixed.
const pinnedMAC = "02:42:0a:ca:00:07"

// macPods are TestMACPinning's pods: their records are written before the
// first ADD (see TestMACPinning).
type macPods struct {
	plain, pinned, split, mcast *corev1.Pod
	splitPinned                 string // the record of split that pins a MAC
	mcastRecord                 string
}

// TestMACPinning runs the real plugin against the daemon, the API server and
// the manager: a pod whose IPInstance pins a MAC (spec.address.mac) gets
// exactly that MAC on eth0 in its namespace, read over netlink, and the ADD
// result reports it; a pod without one gets a MAC the kernel chose; CHECK
// with the runtime's prevResult passes and, once the MAC is changed in the
// pod, names it; a dual-stack pod whose records disagree on the MAC, and a
// pod whose record pins a multicast MAC, fail the ADD naming the record and
// the field and leave no veth; a daemon restarted without its state file
// keeps the pinned MAC.
func TestMACPinning(t *testing.T) {
	requirements(t)
	cfg, k8s := startAPIServer(t, false)
	startManager(t, cfg, k8s.Scheme())
	overlay(t, k8s, "mac-overlay", "10.202.0.0/24")
	v6 := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "mac-overlay-v6"},
		Spec: estuaryv1.SubnetSpec{Network: "mac-overlay", Range: estuaryv1.AddressRange{Version: 6, CIDR: "fd00:202::/120"}}}
	if err := k8s.Create(bg(), v6); err != nil {
		t.Fatal(err)
	}
	n := &node{k8s: k8s, host: fakeHost(t), health: freeAddr(t)}
	n.cfg = daemon.Config{NodeName: nodeName, Kube: cfg, CNIBinarySource: buildCNI(t), AddressTimeout: addressTimeout,
		HostNetns: n.host, HealthAddr: n.health}
	inTempDir(t, &n.cfg)
	n.stop = startDaemon(t, n.cfg)
	n.useInstalled(t)
	pods := recordMACPods(t, k8s)

	// The daemon reads the records through one watch, which delivers them
	// in order: once it serves plain-0, created after every record above
	// was written, it has those writes too.
	if !t.Run("kernel MAC", func(t *testing.T) { n.testKernelMAC(t, pods.plain) }) {
		t.FailNow()
	}
	pinned := &pinnedPod{pod: pods.pinned, netns: nstest.New(t), id: "it-mac-pinned"}
	if !t.Run("pinned MAC", func(t *testing.T) { n.testPinnedMAC(t, pinned) }) {
		t.FailNow()
	}
	t.Run("records disagree", func(t *testing.T) {
		n.testRefused(t, pods.split, "it-mac-split", "ipinstance "+pods.splitPinned)
	})
	t.Run("multicast MAC", func(t *testing.T) {
		n.testRefused(t, pods.mcast, "it-mac-mcast", "ipinstance "+pods.mcastRecord, "multicast")
	})
	n.restartWithoutState(t)
	t.Run("state file lost", func(t *testing.T) { n.testPinnedMACKept(t, pinned) })
}

// pinnedPod is the pod with a pinned MAC, plumbed by one subtest and
// checked by the next.
type pinnedPod struct {
	pod   *corev1.Pod
	netns string
	id    string
	check cniCall // CHECK with the ADD's result as prevResult
}

// recordMACPods creates the test's pods and writes the MACs into their
// records: pinned-0's one record pins pinnedMAC, one of split-0's two
// (dual-stack) records pins it and the other pins none, mcast-0's record
// pins a multicast address; plain-0, created last, pins none.
func recordMACPods(t *testing.T, k8s client.Client) macPods {
	t.Helper()
	v4 := map[string]string{estuaryv1.AnnotationIPFamily: estuaryv1.IPFamilyIPv4}
	var p macPods
	p.pinned = newAnnotatedPod(t, k8s, "pinned-0", v4)
	pin(t, k8s, boundAddress(t, k8s, p.pinned), pinnedMAC)
	p.split = newAnnotatedPod(t, k8s, "split-0", map[string]string{estuaryv1.AnnotationIPFamily: estuaryv1.IPFamilyDualStack})
	split := boundAddresses(t, k8s, p.split, 2)
	pin(t, k8s, split[0], pinnedMAC)
	p.splitPinned = split[0].Name
	p.mcast = newAnnotatedPod(t, k8s, "mcast-0", v4)
	mcast := boundAddress(t, k8s, p.mcast)
	pin(t, k8s, mcast, "01:00:5e:00:00:07")
	p.mcastRecord = mcast.Name
	p.plain = newAnnotatedPod(t, k8s, "plain-0", v4)
	boundAddress(t, k8s, p.plain)
	return p
}

// pin writes mac into the record's spec.address.mac.
func pin(t *testing.T, k8s client.Client, ipi estuaryv1.IPInstance, mac string) {
	t.Helper()
	orig := ipi.DeepCopy()
	ipi.Spec.Address.MAC = mac
	if err := k8s.Patch(bg(), &ipi, client.MergeFrom(orig)); err != nil {
		t.Fatalf("pin MAC %s on ipinstance %s: %v", mac, ipi.Name, err)
	}
}

// useInstalled points n at the plugin and the plugin config the daemon
// installed.
func (n *node) useInstalled(t *testing.T) {
	t.Helper()
	n.bin = filepath.Join(n.cfg.CNIBinDir, daemon.PluginType)
	raw, err := os.ReadFile(filepath.Join(n.cfg.CNIConfDir, daemon.ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	var list daemon.Conflist
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("conflist %s: %v", raw, err)
	}
	if n.stdin, err = list.PluginConfig("estuary"); err != nil {
		t.Fatal(err)
	}
}

func (n *node) testKernelMAC(t *testing.T, p *corev1.Pod) {
	podNS := nstest.New(t)
	res := n.add(t, "it-mac-plain", podNS, p)
	got := podMAC(t, podNS)
	if got.IsZero() || got.IsMulticast() || got.String() == pinnedMAC || got == podnet.HostMAC {
		t.Errorf("eth0 of a pod without a pinned MAC has %s, want a unicast MAC the kernel chose", got)
	}
	if len(res.Interfaces) != 2 || res.Interfaces[1].Mac != got.String() {
		t.Errorf("ADD result interfaces = %+v, want the pod side with %s", res.Interfaces, got)
	}
	n.call("DEL", "it-mac-plain", podNS, p).run(t).ok(t, "DEL")
}

func (n *node) testPinnedMAC(t *testing.T, p *pinnedPod) {
	res := n.add(t, p.id, p.netns, p.pod)
	if got := podMAC(t, p.netns); got.String() != pinnedMAC {
		t.Errorf("eth0 in the pod has MAC %s, want the pinned %s", got, pinnedMAC)
	}
	if len(res.Interfaces) != 2 || res.Interfaces[1].Mac != pinnedMAC || res.Interfaces[1].Sandbox != p.netns {
		t.Errorf("ADD result interfaces = %+v, want the pod side with %s", res.Interfaces, pinnedMAC)
	}
	if err := nstest.UDPRoundTrip(n.host, netip.MustParseAddr(res.IPs[0].Address.IP.String()), p.netns); err != nil {
		t.Errorf("fake host -> pod: %v", err)
	}
	p.check = n.call("CHECK", p.id, p.netns, p.pod)
	p.check.stdin = withPrevResult(t, n.stdin, res)
	p.check.run(t).ok(t, "CHECK")
}

// testPinnedMACKept runs after the daemon restarted without its state
// file: the pod keeps its MAC, CHECK passes against the endpoint rebuilt
// from the kernel, the ADD the runtime retries reports the MAC, and CHECK
// names a MAC changed in the pod.
func (n *node) testPinnedMACKept(t *testing.T, p *pinnedPod) {
	if got := podMAC(t, p.netns); got.String() != pinnedMAC {
		t.Errorf("after the daemon restarted without its state file eth0 has %s, want %s", got, pinnedMAC)
	}
	p.check.run(t).ok(t, "CHECK after the daemon restarted without its state file")
	if res := n.add(t, p.id, p.netns, p.pod); res.Interfaces[1].Mac != pinnedMAC {
		t.Errorf("ADD of the rebuilt endpoint reports MAC %s, want %s", res.Interfaces[1].Mac, pinnedMAC)
	}
	ipCmd(t, p.netns, "link", "set", "eth0", "address", "02:42:0a:ca:00:99")
	e := p.check.run(t).cniError(t)
	if msg := e.Msg + " " + e.Details; !strings.Contains(msg, "interface eth0 has MAC 02:42:0a:ca:00:99, not the pinned "+pinnedMAC) {
		t.Errorf("CHECK after the pod's MAC changed = %q, want it to name the pinned MAC", msg)
	}
	n.call("DEL", p.id, p.netns, p.pod).run(t).ok(t, "DEL")
}

// testRefused: the ADD of pod p fails naming the record and the field (and
// each of want), and leaves no veth on either side.
func (n *node) testRefused(t *testing.T, p *corev1.Pod, id string, want ...string) {
	podNS := nstest.New(t)
	before := strings.Count(ipCmd(t, n.host, "-o", "link", "show"), podnet.HostVethPrefix)
	e := n.call("ADD", id, podNS, p).run(t).cniError(t)
	msg := e.Msg + " " + e.Details
	for _, s := range append(want, "spec.address.mac", "pod "+p.Namespace+"/"+p.Name) {
		if !strings.Contains(msg, s) {
			t.Errorf("ADD error %q does not name %q", msg, s)
		}
	}
	t.Logf("ADD refused: code %d: %s", e.Code, msg)
	hostVeth := podnet.HostVethName(id, "eth0")
	if out, err := tryIP(n.host, "link", "show", hostVeth); err == nil {
		t.Errorf("refused ADD left host veth %s:\n%s", hostVeth, out)
	}
	if after := strings.Count(ipCmd(t, n.host, "-o", "link", "show"), podnet.HostVethPrefix); after != before {
		t.Errorf("the fake host has %d estuary veths after the refused ADD, %d before", after, before)
	}
	if out := ipCmd(t, podNS, "-o", "link", "show"); strings.Contains(out, "eth0") {
		t.Errorf("refused ADD left eth0 in the pod:\n%s", out)
	}
	n.call("DEL", id, podNS, p).run(t).ok(t, "DEL after the refused ADD")
}

// add runs ADD and returns its result.
func (n *node) add(t *testing.T, id, podNS string, p *corev1.Pod) *types100.Result {
	t.Helper()
	o := n.call("ADD", id, podNS, p).run(t).ok(t, "ADD")
	res, err := types100.NewResult([]byte(o.stdout))
	if err != nil {
		t.Fatalf("ADD output %q: %v", o.stdout, err)
	}
	r := res.(*types100.Result)
	if len(r.IPs) == 0 || len(r.Interfaces) != 2 {
		t.Fatalf("ADD result %s: want addresses and two interfaces", o.stdout)
	}
	return r
}

// restartWithoutState stops the daemon, deletes its state file and starts
// it again, until t ends.
func (n *node) restartWithoutState(t *testing.T) {
	t.Helper()
	if err := n.stop(); err != nil {
		t.Fatalf("daemon stopped with %v", err)
	}
	if err := os.Remove(n.cfg.StatePath); err != nil {
		t.Fatal(err)
	}
	n.stop = startDaemon(t, n.cfg)
	n.testHealthy(t)
}

// podMAC reads eth0's MAC in the pod's namespace over netlink.
func podMAC(t *testing.T, podNS string) desired.MAC {
	t.Helper()
	h, err := ops.Open(podNS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.Links().Get("eth0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := desired.MACFrom(l.MAC)
	if err != nil {
		t.Fatalf("eth0 in %s: %v", podNS, err)
	}
	return m
}

// withPrevResult is the plugin config conf with res as its prevResult, as
// the runtime passes it on CHECK.
func withPrevResult(t *testing.T, conf []byte, res *types100.Result) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(conf, &m); err != nil {
		t.Fatal(err)
	}
	m["prevResult"] = res
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
