package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab/images"
)

func readyNode(name string, edit ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, e := range edit {
		e(&n)
	}
	return n
}

// underlayNetwork is an Underlay network whose domain is the nodes
// labelled net-<name>=true (inDomains).
func underlayNetwork(name string) estuaryv1.Network {
	return estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, NodeSelector: map[string]string{"net-" + name: "true"}}}
}

// inDomains puts a node in the domains of the networks named.
func inDomains(networks ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for _, nw := range networks {
			n.Labels["net-"+nw] = "true"
		}
	}
}

func subnetOf(name, network, available string, private bool) estuaryv1.Subnet {
	return estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   estuaryv1.SubnetSpec{Network: network, Private: private},
		Status: estuaryv1.SubnetStatus{Available: available}}
}

// pathKinds lists the plan's paths as "kind from->to" or "kind SKIP".
func pathKinds(p connPlan) []string {
	var out []string
	for _, path := range p.Paths {
		s := fmt.Sprintf("%s %s->%s", path.Kind, path.From, path.To)
		if path.Skip != "" {
			s = path.Kind + " SKIP"
		}
		out = append(out, s)
	}
	return out
}

// The two overlay nodes are the first usable ones by name: cordoned,
// tainted and NotReady nodes are left out. Each Underlay network that can
// take a probe gets one, on a domain node other than A when it has one,
// with a path each way; the others are named in no path.
func TestPlanChoosesNodesAndUnderlays(t *testing.T) {
	in := planInput{
		Namespace: "probe-ns",
		Nodes: []corev1.Node{
			readyNode("n3", inDomains("rack2")), readyNode("n2", inDomains("rack1", "full", "private", "tenant")),
			readyNode("a-cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
			readyNode("a-tainted", inDomains("elsewhere"), func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
			}),
			readyNode("a-prefer", inDomains("rack1"), func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
			}),
			readyNode("a-notready", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
		},
		Networks: []estuaryv1.Network{
			{ObjectMeta: metav1.ObjectMeta{Name: "overlay"}, Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay}},
			underlayNetwork("rack1"),
			underlayNetwork("full"),
			underlayNetwork("private"),
			underlayNetwork("elsewhere"),
			func() estuaryv1.Network {
				nw := underlayNetwork("tenant")
				nw.Spec.Namespaces = []string{"other"}
				return nw
			}(),
			underlayNetwork("rack2"),
		},
		Subnets: []estuaryv1.Subnet{
			subnetOf("rack1-v4", "rack1", "190", false),
			subnetOf("full-v4", "full", "0", false),
			subnetOf("private-v4", "private", "10", true),
			subnetOf("elsewhere-v4", "elsewhere", "10", false),
			subnetOf("tenant-v4", "tenant", "10", false),
			subnetOf("rack2-nostatus", "rack2", "", false),
			subnetOf("rack2-v4", "rack2", "5", false),
		},
	}
	p, err := makePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.NodeA != "a-prefer" || p.NodeB != "n2" || p.Usable != 3 {
		t.Errorf("nodes A %s, B %s, %d usable; want a-prefer, n2, 3", p.NodeA, p.NodeB, p.Usable)
	}
	if p.RetainFrom != "n2" || p.RetainTo != "a-prefer" {
		t.Errorf("the StatefulSet pod moves %s -> %s, want n2 -> a-prefer", p.RetainFrom, p.RetainTo)
	}
	wantUnder := []underlayChoice{
		{Network: "rack1", Subnet: "rack1-v4", Node: "n2", Pod: "underlay-1"},
		{Network: "rack2", Subnet: "rack2-v4", Node: "n3", Pod: "underlay-2"},
	}
	if !slices.Equal(p.Underlays, wantUnder) {
		t.Errorf("underlays %+v, want %+v", p.Underlays, wantUnder)
	}
	wantPods := []probePod{
		{Name: probeClient, Node: "a-prefer"}, {Name: probeSame, Node: "a-prefer"},
		{Name: probeOther, Node: "n2", Backend: true}, {Name: probeHost, Node: "a-prefer", HostNetwork: true},
		{Name: "underlay-1", Node: "n2", Network: "rack1"}, {Name: "underlay-2", Node: "n3", Network: "rack2"},
		{Name: probePolicyTarget, Node: "n2"},
	}
	if !slices.Equal(p.Pods, wantPods) {
		t.Errorf("pods %+v, want %+v", p.Pods, wantPods)
	}
	want := []string{
		"pod-to-pod/same-node client->same-node", "pod-to-pod/same-node same-node->client",
		"pod-to-pod/across-nodes client->other-node", "pod-to-pod/across-nodes other-node->client",
		"pod-to-service client->other-node",
		"node-to-pod/across-nodes host->other-node", "node-to-pod/same-node host->client",
		"pod-to-external SKIP",
		"overlay-to-underlay client->underlay-1", "underlay-to-overlay underlay-1->client",
		"overlay-to-underlay client->underlay-2", "underlay-to-overlay underlay-2->client",
		"retained-address client->retain-0",
		"policy/deny-ingress client->policy-target", "policy/allow-ingress client->policy-target",
		"policy/deny-ingress same-node->policy-target",
	}
	if got := pathKinds(p); !slices.Equal(got, want) {
		t.Errorf("paths:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// underlayNone is the plan's path saying why no Underlay network is
// probed.
func underlayNone(p connPlan) probePath {
	for _, path := range p.Paths {
		if path.Kind == pathUnderlayNone {
			return path
		}
	}
	return probePath{}
}

// With no Underlay network that can take a probe, one skipped path says
// why for each.
func TestPlanSaysWhyNoUnderlay(t *testing.T) {
	in := planInput{Namespace: "ns", Nodes: []corev1.Node{readyNode("n1", inDomains("full")), readyNode("n2")},
		Networks: []estuaryv1.Network{underlayNetwork("full"), underlayNetwork("away")},
		Subnets:  []estuaryv1.Subnet{subnetOf("full-v4", "full", "0", false), subnetOf("away-v4", "away", "3", false)}}
	p, err := makePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	skip := underlayNone(p)
	want := "no Underlay network can take a probe: full has no public subnet with a free address; " +
		"away has no usable node in its domain (nodes with net-away=true)"
	if skip.Kind != pathUnderlayNone || skip.Skip != want {
		t.Errorf("underlay path %+v, want skip %q", skip, want)
	}

	in.Networks, in.NetworksErr = nil, errors.New(`no matches for kind "Network"`)
	p, err = makePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if skip := underlayNone(p); !strings.Contains(skip.Skip, `estuary Networks unreadable: no matches for kind "Network"`) {
		t.Errorf("underlay path without the CRDs: %+v", skip)
	}
	in.NetworksErr = nil
	p, _ = makePlan(in)
	if skip := underlayNone(p); skip.Skip != "no Underlay network" {
		t.Errorf("underlay path without networks: %+v", skip)
	}
}

// On one usable node the cross-node paths are skipped, the Service's
// backend and the StatefulSet's pod stay on it.
func TestPlanOneNode(t *testing.T) {
	p, err := makePlan(planInput{Namespace: "ns", Nodes: []corev1.Node{readyNode("solo")}, External: "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	if p.NodeA != "solo" || p.NodeB != "solo" || p.RetainFrom != "solo" || p.RetainTo != "solo" {
		t.Errorf("plan %+v: want everything on solo", p)
	}
	for _, path := range p.Paths {
		across := path.Kind == pathPodAcross || path.Kind == pathNodeAcross
		if across != (path.Skip == "only one node can run the probe pods") {
			t.Errorf("path %s: skip %q", path.Kind, path.Skip)
		}
		if path.Kind == pathExternal && (path.Skip != "" || path.Expect != expectICMP) {
			t.Errorf("external path to an address: %+v, want an ICMP probe", path)
		}
	}
}

func TestPlanNoUsableNode(t *testing.T) {
	_, err := makePlan(planInput{Nodes: []corev1.Node{
		readyNode("c", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		readyNode("d", func(n *corev1.Node) { n.Status.Conditions = nil }),
	}})
	want := "no node can run the probe pods: node c is cordoned; node d reports no Ready condition"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if _, err := makePlan(planInput{}); err == nil || !strings.Contains(err.Error(), "the cluster has no nodes") {
		t.Errorf("no nodes: %v", err)
	}
}

func TestExternalPath(t *testing.T) {
	for _, c := range []struct {
		target string
		expect expect
		skip   string
	}{
		{"", expectConnect, "no --external-target given"},
		{"10.77.0.3:8080", expectConnect, ""},
		{"example.com:443", expectConnect, ""},
		{"10.77.0.3", expectICMP, ""},
		{"fd00::3", expectICMP, ""},
	} {
		p := externalPath(c.target)
		if p.Expect != c.expect || p.Skip != c.skip || p.From != probeClient {
			t.Errorf("externalPath(%q) = %+v, want expect %d skip %q", c.target, p, c.expect, c.skip)
		}
	}
}

func TestConnFlagsValidate(t *testing.T) {
	good := connFlags{output: "text", readyTimeout: time.Minute, pathTimeout: time.Second, probeTimeout: time.Second, cleanupTimeout: time.Minute}
	for _, ext := range []string{"", "10.0.0.1", "fd00::1", "10.0.0.1:80", "[fd00::1]:443", "example.com:8080"} {
		f := good
		f.external = ext
		if err := f.validate(); err != nil {
			t.Errorf("--external-target %q: %v", ext, err)
		}
	}
	for _, ext := range []string{"example.com", "10.0.0.1:0", "10.0.0.1:http", ":80", "10.0.0.1:70000"} {
		f := good
		f.external = ext
		if err := f.validate(); err == nil || !strings.Contains(err.Error(), "want host:port or an IP address") {
			t.Errorf("--external-target %q: %v, want refused", ext, err)
		}
	}
	f := good
	f.pathTimeout = 0
	if err := f.validate(); err == nil || !strings.Contains(err.Error(), "--path-timeout must be positive") {
		t.Errorf("zero path timeout: %v", err)
	}
	f = good
	f.output = "wide"
	if err := f.validate(); err == nil {
		t.Error("-o wide accepted")
	}
}

// The default probe image is the agnhost the lab serves under its
// upstream name.
func TestDefaultProbeImageIsTheLabsAgnhost(t *testing.T) {
	if defaultProbeImage != images.UpstreamAgnhost {
		t.Errorf("default --image %s, the lab serves %s", defaultProbeImage, images.UpstreamAgnhost)
	}
}

func TestParseCurl(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      curlResult
	}{
		{"answer", "10.244.0.5:41234\n@@curl 0.000412 200\n@@exit 0\n",
			curlResult{Body: "10.244.0.5:41234", Connect: 412 * time.Microsecond, Code: 200}},
		{"refused", "curl: (7) Failed to connect to 10.244.0.9 port 8080 after 1 ms: Couldn't connect to server\n\n@@curl 0.000000 000\n@@exit 7\n",
			curlResult{Exit: 7, Err: "curl: (7) Failed to connect to 10.244.0.9 port 8080 after 1 ms: Couldn't connect to server"}},
		{"connected, no HTTP", "\n@@curl 0.001500 000\ncurl: (28) Operation timed out after 5001 milliseconds with 0 bytes received\n@@exit 28\n",
			curlResult{Connect: 1500 * time.Microsecond, Exit: 28, Err: "curl: (28) Operation timed out after 5001 milliseconds with 0 bytes received"}},
	} {
		got, err := parseCurl(c.out)
		if err != nil || got != c.want {
			t.Errorf("%s: parseCurl = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := parseCurl("sh: curl: not found\n@@exit 127\n"); err == nil || !strings.Contains(err.Error(), "curl did not run (exit 127): sh: curl: not found") {
		t.Errorf("curl missing: %v", err)
	}
	if _, err := parseCurl("10.0.0.1:5\n"); err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("cut output: %v", err)
	}
}

func TestParsePing(t *testing.T) {
	busybox := "PING 10.244.0.7 (10.244.0.7): 56 data bytes\n64 bytes from 10.244.0.7: seq=0 ttl=64 time=0.412 ms\n\n" +
		"--- 10.244.0.7 ping statistics ---\n3 packets transmitted, 3 packets received, 0% packet loss\n" +
		"round-trip min/avg/max = 0.072/0.181/0.412 ms\n@@exit 0\n"
	iputils := "--- 10.0.0.1 ping statistics ---\n3 packets transmitted, 2 received, 33.3333% packet loss, time 402ms\n" +
		"rtt min/avg/max/mdev = 0.031/0.040/0.049/0.007 ms\n@@exit 0\n"
	lost := "--- 10.0.0.9 ping statistics ---\n3 packets transmitted, 0 packets received, 100% packet loss\n@@exit 1\n"
	for _, c := range []struct {
		name, out string
		want      pingResult
		why       string
	}{
		{"busybox", busybox, pingResult{Received: 3, Avg: 181 * time.Microsecond}, ""},
		{"iputils", iputils, pingResult{Received: 2, Avg: 40 * time.Microsecond}, "icmp: 2 of 3 echo replies"},
		{"lost", lost, pingResult{Exit: 1}, "icmp: 0 of 3 echo replies"},
	} {
		got, err := parsePing(c.out)
		if err != nil || got != c.want {
			t.Errorf("%s: parsePing = %+v, %v; want %+v", c.name, got, err, c.want)
		}
		if why := judgePing(got); why != c.why {
			t.Errorf("%s: judgePing = %q, want %q", c.name, why, c.why)
		}
	}
	if _, err := parsePing("ping: bad address 'x'\n@@exit 1\n"); err == nil || !strings.Contains(err.Error(), "ping (exit 1): ping: bad address 'x'") {
		t.Errorf("bad address: %v", err)
	}
}

func TestJudgeTCP(t *testing.T) {
	ok := curlResult{Body: "10.244.0.5:4000", Connect: time.Millisecond, Code: 200}
	for _, c := range []struct {
		name string
		t    target
		r    curlResult
		want string
	}{
		{"own address", target{Expect: expectClientIP, Want: []string{"10.244.0.5"}}, ok, ""},
		{"NATed", target{Expect: expectClientIP, Want: []string{"10.244.0.6"}}, ok,
			"the peer saw the client as 10.244.0.5, not as 10.244.0.6 (NAT on a path that must keep addresses)"},
		{"hostname", target{Expect: expectHostname, Want: []string{"other-node"}}, curlResult{Body: "other-node", Connect: 1, Code: 200}, ""},
		{"wrong pod", target{Expect: expectHostname, Want: []string{"other-node"}}, curlResult{Body: "same-node", Connect: 1, Code: 200},
			"same-node answered, not other-node"},
		{"refused", target{Expect: expectConnect}, curlResult{Exit: 7, Err: "curl: (7) refused"}, "curl: (7) refused"},
		{"timeout", target{Expect: expectHostname}, curlResult{Exit: 28}, "no TCP connection (curl exit 28)"},
		{"connect only", target{Expect: expectConnect}, curlResult{Connect: 1, Exit: 28}, ""},
		{"HTTP error", target{Expect: expectHostname, Want: []string{"x"}}, curlResult{Connect: 1, Code: 503, Exit: 0},
			"connected, but no answer: HTTP 503, curl exit 0 "},
	} {
		if got := judgeTCP(c.t, c.r); got != c.want {
			t.Errorf("%s: judgeTCP = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestProbeArgv(t *testing.T) {
	got := strings.Join(tcpArgv("http://10.0.0.1:8080/clientip", true, 2500*time.Millisecond), "|")
	want := `sh|-c|curl -sS -m "$2" -o "$3" -w '\n@@curl %{time_connect} %{http_code}\n' "$1" 2>&1; echo "@@exit $?"|sh|http://10.0.0.1:8080/clientip|3|-`
	if got != want {
		t.Errorf("tcpArgv:\n%s\nwant\n%s", got, want)
	}
	if got := tcpArgv("http://x:1", false, time.Second); got[len(got)-1] != "/dev/null" {
		t.Errorf("tcpArgv without body writes to %s", got[len(got)-1])
	}
	got = strings.Join(pingArgv("fd00::7", 100*time.Millisecond), "|")
	want = `sh|-c|ping -c "$3" -i 0.2 -W "$2" "$1" 2>&1; echo "@@exit $?"|sh|fd00::7|1|3`
	if got != want {
		t.Errorf("pingArgv:\n%s\nwant\n%s", got, want)
	}
}

// A path is probed until it passes, every interval: four failed tries and
// a passing one make an OK after 5 tries, with the last try's measures; a
// path that never passes fails at its timeout with the last reason.
func TestProbeUntilRetriesUntilItPasses(t *testing.T) {
	calls := 0
	run := func(_ context.Context, _ *corev1.Pod, ctr string, argv []string) (string, string, error) {
		if ctr != probeContainer {
			t.Errorf("exec in container %s", ctr)
		}
		calls++
		if strings.Contains(argv[2], "curl") {
			if calls < 5 {
				return "curl: (7) refused\n@@curl 0.000000 000\n@@exit 7\n", "", nil
			}
			return "client\n@@curl 0.000300 200\n@@exit 0\n", "", nil
		}
		return "3 packets transmitted, 3 packets received\nround-trip min/avg/max = 0.1/0.2/0.3 ms\n@@exit 0\n", "", nil
	}
	src := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "same-node"}}
	tg := target{Host: "10.0.0.1", Port: netexecPort, URL: "/hostname", Expect: expectHostname, Want: []string{"client"}, ICMP: true}
	m, attempts, err := probeUntil(context.Background(), run, src, tg, time.Second, 10*time.Second, time.Millisecond)
	if err != nil || attempts != 5 {
		t.Fatalf("probeUntil: %d attempts, %v; want 5, nil", attempts, err)
	}
	if m.TCP == nil || *m.TCP != 300*time.Microsecond || m.ICMP == nil || *m.ICMP != 200*time.Microsecond {
		t.Errorf("measure tcp %v icmp %v, want 300µs and 200µs", m.TCP, m.ICMP)
	}

	calls = -100
	start := time.Now()
	_, attempts, err = probeUntil(context.Background(), run, src, tg, time.Second, 50*time.Millisecond, 10*time.Millisecond)
	if !errors.Is(err, errProbe) || !strings.Contains(err.Error(), "curl: (7) refused") || attempts < 2 {
		t.Errorf("a path that never passes: %d attempts, %v", attempts, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a 50ms path timeout took %s", d)
	}
}

func TestResultLine(t *testing.T) {
	for _, c := range []struct {
		res  connResult
		want string
	}{
		{connResult{Path: pathPodAcross, Status: statusOK, From: "client (n1, 10.0.0.5)", To: "other-node (n2, 10.0.0.7)",
			TCPMillis: ptr.To(0.412), ICMPMillis: ptr.To(0.18), Attempts: 1},
			"OK    pod-to-pod/across-nodes   client (n1, 10.0.0.5) -> other-node (n2, 10.0.0.7): tcp 0.41ms, icmp 0.18ms"},
		{connResult{Path: pathService, Status: statusFail, From: "client (n1, 10.0.0.5)", To: "service backend 10.96.0.9:80 (backend other-node)",
			Reason: "probe failed: tcp http://10.96.0.9:80/hostname: no TCP connection (curl exit 28)", Attempts: 7},
			"FAIL  pod-to-service            client (n1, 10.0.0.5) -> service backend 10.96.0.9:80 (backend other-node): " +
				"probe failed: tcp http://10.96.0.9:80/hostname: no TCP connection (curl exit 28) (7 tries)"},
		{connResult{Path: pathExternal, Status: statusSkip, Reason: "no --external-target given"},
			"SKIP  pod-to-external           no --external-target given"},
		{connResult{Path: pathRetained, Status: statusOK, From: "client", To: "retain-0", TCPMillis: ptr.To(1.0), Reason: "address kept", Attempts: 2},
			"OK    retained-address          client -> retain-0: tcp 1.00ms, address kept (2 tries)"},
	} {
		if got := resultLine(c.res); got != c.want {
			t.Errorf("resultLine:\n%q\nwant\n%q", got, c.want)
		}
	}
}

func TestFamilies(t *testing.T) {
	dual := &corev1.Pod{Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "fd00::5"}, {IP: "10.0.0.5"}}}}
	v6 := &corev1.Pod{Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "fd00::6"}}}}
	v4 := &corev1.Pod{Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.0.0.4"}}}}
	if got := commonFamilies(dual, dual); !slices.Equal(got, []string{"IPv4", "IPv6"}) {
		t.Errorf("dual/dual: %v", got)
	}
	if got := commonFamilies(dual, v6); !slices.Equal(got, []string{"IPv6"}) {
		t.Errorf("dual/v6: %v", got)
	}
	if got := commonFamilies(v4, v6); len(got) != 0 {
		t.Errorf("v4/v6: %v", got)
	}
	if addrOf(dual, "IPv4") != "10.0.0.5" || addrOf(dual, "IPv6") != "fd00::5" || familyOf("example.com") != "" {
		t.Error("addrOf or familyOf")
	}
}

// With -o json no path line is printed as it finishes: stdout is one
// report with every result and the counts, and a failed path still makes
// the exit status 3.
func TestConnectivityJSONReport(t *testing.T) {
	var out, errOut strings.Builder
	r := &connRun{f: &connFlags{output: "json"}, s: Streams{Out: &out, Err: &errOut},
		report: connReport{Namespace: "ns", Image: "img", Nodes: []string{"n1", "n2"}}}
	for _, res := range []connResult{
		{Path: pathPodSame, Status: statusOK, From: "client", To: "same-node", Family: "IPv4", TCPMillis: ptr.To(0.5), Attempts: 1},
		{Path: pathService, Status: statusFail, Reason: "no TCP connection", Attempts: 3},
		{Path: pathExternal, Status: statusSkip, Reason: "no --external-target given"},
	} {
		if err := r.add(res); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() != 0 {
		t.Fatalf("lines printed before the report: %q", out.String())
	}
	err := r.finish()
	if ExitCode(err) != 3 {
		t.Errorf("exit %d (%v), want 3", ExitCode(err), err)
	}
	var got connReport
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("decode %q: %v", out.String(), err)
	}
	if got.OK != 1 || got.Failed != 1 || got.Skipped != 1 || len(got.Results) != 3 || got.Namespace != "ns" ||
		*got.Results[0].TCPMillis != 0.5 || got.Results[0].ICMPMillis != nil || got.Results[1].Attempts != 3 {
		t.Errorf("report %+v", got)
	}
	for _, key := range []string{`"tcpMillis": 0.5`, `"status": "SKIP"`, `"nodes": [`} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("json lacks %s:\n%s", key, out.String())
		}
	}
}
