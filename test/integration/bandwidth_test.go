//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// The shaped pod's limits in bit/s, and the burst containerd passes with
// the rate of a kubernetes.io/ingress-bandwidth or egress-bandwidth
// annotation.
const (
	shapedIngressRate = 20_000_000
	shapedEgressRate  = 10_000_000
	annotationBurst   = math.MaxUint32
)

// TestBandwidthChain: the daemon installs the reference portmap and
// bandwidth plugins (static builds of the version the daemon image
// carries) and chains bandwidth in its conflist. The installed conflist,
// run plugin by plugin from the bin dir as a runtime's CNI library runs it,
// with runtimeConfig.bandwidth, leaves a tbf qdisc at the ingress rate on
// the pod's host veth and an ifb device, fed by a mirred filter on the
// veth's ingress, shaped at the egress rate. The daemon keeps its fast path
// off the shaped pod's veth and puts it on an unshaped pod's. DEL removes
// the ifb device with the veth.
func TestBandwidthChain(t *testing.T) {
	plugins, cfg, k8s := chainEnv(t, "bw-overlay", "10.201.0.0/24")

	host, health := fakeHost(t), freeAddr(t)
	dcfg := daemon.Config{
		NodeName:        nodeName,
		Kube:            cfg,
		CNIBinarySource: buildCNI(t),
		CNIExtraPlugins: []string{filepath.Join(plugins, "portmap"), filepath.Join(plugins, "bandwidth")},
		AddressTimeout:  addressTimeout,
		HostNetns:       host,
		HealthAddr:      health,
		FastPath:        true,
	}
	inTempDir(t, &dcfg)
	startDaemon(t, dcfg)
	chain := installedChain(t, dcfg, host)

	shaped := chainCall{id: "it-bw-shaped", netns: nstest.New(t), pod: newPod(t, k8s, "shaped-0"),
		caps: map[string]any{"bandwidth": map[string]any{
			"ingressRate": shapedIngressRate, "ingressBurst": annotationBurst,
			"egressRate": shapedEgressRate, "egressBurst": annotationBurst,
		}}}
	boundAddress(t, k8s, shaped.pod)
	result := chain.add(t, shaped)
	ifb := checkShaped(t, host, shaped.hostVeth(), result)

	t.Run("fast path", func(t *testing.T) { checkFastPathSkipsShaped(t, k8s, chain, health, shaped) })

	chain.del(t, shaped, result)
	for _, dev := range []string{shaped.hostVeth(), ifb} {
		if out, err := tryIP(host, "link", "show", dev); err == nil {
			t.Errorf("%s still there after DEL:\n%s", dev, out)
		}
	}
}

// inTempDir puts every path of cfg under a temporary directory.
func inTempDir(t *testing.T, cfg *daemon.Config) {
	t.Helper()
	dir := t.TempDir()
	cfg.SocketPath = filepath.Join(dir, "run", "cni.sock")
	cfg.StatePath = filepath.Join(dir, "lib", "state.db")
	cfg.CNIBinDir = filepath.Join(dir, "opt", "cni", "bin")
	cfg.CNIConfDir = filepath.Join(dir, "etc", "cni", "net.d")
}

// cniChain runs an installed conflist's plugins from the bin dir inside the
// fake host, following libcni: each plugin gets its entry with the list's
// cniVersion and name, runtimeConfig with the capability arguments it
// declares, and on ADD the previous plugin's result as prevResult; DEL
// runs them in reverse order with the ADD's result.
type cniChain struct {
	version, name string
	plugins       []map[string]any
	binDir, host  string
}

// chainCall is one attachment and the runtime's capability arguments.
type chainCall struct {
	id, netns string
	pod       *corev1.Pod
	caps      map[string]any
}

func (a chainCall) hostVeth() string {
	return podnet.HostVethName(a.id, "eth0")
}

// installedChain reads the daemon's conflist and requires estuary, portmap
// and bandwidth in that order, estuary and bandwidth with the bandwidth
// capability.
func installedChain(t *testing.T, cfg daemon.Config, host string) *cniChain {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cfg.CNIConfDir, daemon.ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("conflist %s: %v", raw, err)
	}
	var types []string
	for _, p := range list.Plugins {
		types = append(types, fmt.Sprint(p["type"]))
	}
	if !slices.Equal(types, []string{"estuary", "portmap", "bandwidth"}) ||
		!declares(list.Plugins[0], "bandwidth") || !declares(list.Plugins[2], "bandwidth") {
		t.Fatalf("conflist = %s; want estuary, portmap and bandwidth chained, estuary and bandwidth with the bandwidth capability", raw)
	}
	return &cniChain{version: list.CNIVersion, name: list.Name, plugins: list.Plugins, binDir: cfg.CNIBinDir, host: host}
}

func declares(plugin map[string]any, capability string) bool {
	caps, _ := plugin["capabilities"].(map[string]any)
	return caps[capability] == true
}

// stdin is the configuration the plugin entry p is run with.
func (c *cniChain) stdin(t *testing.T, p map[string]any, caps map[string]any, prev json.RawMessage) []byte {
	t.Helper()
	conf := maps.Clone(p)
	conf["cniVersion"], conf["name"] = c.version, c.name
	rc := map[string]any{}
	for k, v := range caps {
		if declares(p, k) {
			rc[k] = v
		}
	}
	if len(rc) > 0 {
		conf["runtimeConfig"] = rc
	}
	if prev != nil {
		conf["prevResult"] = prev
	}
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exec runs one plugin of the chain in the fake host and returns its stdout.
func (c *cniChain) exec(t *testing.T, command string, a chainCall, p map[string]any, prev json.RawMessage) json.RawMessage {
	t.Helper()
	typ := fmt.Sprint(p["type"])
	cmd := exec.Command(filepath.Join(c.binDir, typ)) // #nosec G204 -- test
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"CNI_COMMAND=" + command,
		"CNI_CONTAINERID=" + a.id,
		"CNI_NETNS=" + a.netns,
		"CNI_IFNAME=eth0",
		"CNI_PATH=" + c.binDir,
		fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", a.pod.Namespace, a.pod.Name, a.pod.UID),
	}
	cmd.Stdin = bytes.NewReader(c.stdin(t, p, a.caps, prev))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := nsrun.Do(c.host, cmd.Run); err != nil {
		t.Fatalf("%s %s %s: %v\nstdout: %s\nstderr: %s", typ, command, a.id, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// add runs ADD through the chain and returns the last plugin's result.
func (c *cniChain) add(t *testing.T, a chainCall) json.RawMessage {
	t.Helper()
	var prev json.RawMessage
	for _, p := range c.plugins {
		prev = c.exec(t, "ADD", a, p, prev)
	}
	return prev
}

// del runs DEL through the chain in reverse order.
func (c *cniChain) del(t *testing.T, a chainCall, result json.RawMessage) {
	t.Helper()
	for _, p := range slices.Backward(c.plugins) {
		c.exec(t, "DEL", a, p, result)
	}
}

// tcQdisc is a qdisc as `tc -j qdisc show` prints it; rate in byte/s.
type tcQdisc struct {
	Kind    string `json:"kind"`
	Root    bool   `json:"root"`
	Options struct {
		Rate uint64 `json:"rate"`
	} `json:"options"`
}

// tcFilter is a filter as `tc -j filter show` prints it.
type tcFilter struct {
	Kind    string `json:"kind"`
	Options struct {
		Actions []tcAction `json:"actions"`
	} `json:"options"`
}

// tcAction is one action of a tcFilter.
type tcAction struct {
	Kind   string `json:"kind"`
	Mirred string `json:"mirred_action"`
	ToDev  string `json:"to_dev"`
}

// tcJSON runs `tc -n <host> -j args...` and decodes its output into v.
func tcJSON(t *testing.T, host string, v any, args ...string) {
	t.Helper()
	argv := append([]string{"-n", filepath.Base(host), "-j"}, args...)
	out, err := exec.Command("tc", argv...).Output() // #nosec G204 -- test
	if err != nil {
		t.Fatalf("tc %v: %v", argv, err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("tc %v: %v\n%s", argv, err, out)
	}
}

func qdiscsOf(t *testing.T, host, dev string) []tcQdisc {
	t.Helper()
	var qs []tcQdisc
	tcJSON(t, host, &qs, "qdisc", "show", "dev", dev)
	return qs
}

// checkShaped requires the bandwidth plugin's work in the fake host: a tbf
// root qdisc at the ingress rate on the host veth; an ingress qdisc there
// whose u32 filter redirects to the ifb device the result lists; a tbf at
// the egress rate on that device. It returns the ifb device's name.
func checkShaped(t *testing.T, host, hostVeth string, result json.RawMessage) string {
	t.Helper()
	ifb := resultIfb(t, host, result)
	checkTbf(t, host, hostVeth, shapedIngressRate)
	checkTbf(t, host, ifb, shapedEgressRate)
	qdiscs := qdiscsOf(t, host, hostVeth)
	if !slices.ContainsFunc(qdiscs, func(q tcQdisc) bool { return q.Kind == "ingress" }) {
		t.Errorf("%s: qdiscs %+v, want an ingress qdisc", hostVeth, qdiscs)
	}
	var filters []tcFilter
	tcJSON(t, host, &filters, "filter", "show", "dev", hostVeth, "ingress")
	if !slices.ContainsFunc(filters, func(f tcFilter) bool { return redirectsTo(f, ifb) }) {
		t.Errorf("%s: ingress filters %+v, want a u32 one redirecting to %s", hostVeth, filters, ifb)
	}
	return ifb
}

// resultIfb finds the ifb device of the fake host among the result's
// interfaces.
func resultIfb(t *testing.T, host string, result json.RawMessage) string {
	t.Helper()
	res, err := types100.NewResult(result)
	if err != nil {
		t.Fatalf("chain result %s: %v", result, err)
	}
	for _, iface := range res.(*types100.Result).Interfaces {
		if iface.Sandbox != "" {
			continue
		}
		var links []struct {
			LinkInfo struct {
				Kind string `json:"info_kind"`
			} `json:"linkinfo"`
		}
		out, err := tryIP(host, "-j", "-d", "link", "show", iface.Name)
		if err == nil && json.Unmarshal([]byte(out), &links) == nil && len(links) == 1 && links[0].LinkInfo.Kind == "ifb" {
			return iface.Name
		}
	}
	t.Fatalf("chain result %s lists no ifb device of the fake host", result)
	return ""
}

// checkTbf requires dev's root qdisc to be a tbf at rate bit/s.
func checkTbf(t *testing.T, host, dev string, rate uint64) {
	t.Helper()
	qdiscs := qdiscsOf(t, host, dev)
	for _, q := range qdiscs {
		if q.Kind == "tbf" && q.Root {
			if q.Options.Rate != rate/8 {
				t.Errorf("%s: tbf rate %d byte/s, want %d (%d bit/s)", dev, q.Options.Rate, rate/8, rate)
			}
			return
		}
	}
	t.Errorf("%s: qdiscs %+v, want a root tbf", dev, qdiscs)
}

func redirectsTo(f tcFilter, dev string) bool {
	return f.Kind == "u32" && slices.ContainsFunc(f.Options.Actions, func(a tcAction) bool {
		return a.Kind == "mirred" && a.Mirred == "redirect" && a.ToDev == dev
	})
}

// checkFastPathSkipsShaped adds an unshaped pod and waits until the
// daemon's fast path runs on its veth; by then the data-path loop has
// passed over the shaped pod too, whose veth must carry no fast path and no
// clsact qdisc (the bandwidth plugin's ingress qdisc holds its place).
func checkFastPathSkipsShaped(t *testing.T, k8s client.Client, chain *cniChain, health string, shaped chainCall) {
	t.Helper()
	if !fastPathLoaded(t, health) {
		t.Skip("the daemon's fast path is not loaded on this kernel (its log says why)")
	}
	plain := chainCall{id: "it-bw-plain", netns: nstest.New(t), pod: newPod(t, k8s, "plain-0")}
	boundAddress(t, k8s, plain.pod)
	result := chain.add(t, plain)
	h, err := ops.Open(chain.host)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	testenv.Eventually(t, "fast path on the unshaped pod's veth "+plain.hostVeth(), 30*time.Second, func() error {
		p, ok, err := h.TC().Ingress(plain.hostVeth())
		if err == nil && (!ok || p.Name != fastpath.Name) {
			err = fmt.Errorf("ingress program %+v (%v), want %s", p, ok, fastpath.Name)
		}
		return err
	})
	if p, ok, err := h.TC().Ingress(shaped.hostVeth()); err != nil || ok {
		t.Errorf("shaped pod's veth %s: ingress program %+v (%v), %v; want none", shaped.hostVeth(), p, ok, err)
	}
	if qdiscs := qdiscsOf(t, chain.host, shaped.hostVeth()); slices.ContainsFunc(qdiscs, func(q tcQdisc) bool { return q.Kind == "clsact" }) {
		t.Errorf("shaped pod's veth %s: qdiscs %+v, want no clsact", shaped.hostVeth(), qdiscs)
	}
	chain.del(t, plain, result)
}

// fastPathLoaded reads the daemon's /metrics for the fast path's counters.
func fastPathLoaded(t *testing.T, health string) bool {
	t.Helper()
	var body []byte
	testenv.Eventually(t, "daemon /metrics", 15*time.Second, func() error {
		resp, err := http.Get("http://" + health + "/metrics")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err = io.ReadAll(resp.Body)
		return err
	})
	return bytes.Contains(body, []byte("estuary_fastpath_packets_total"))
}
