package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/policydrops"
)

// The nodes' reports merge oldest first across nodes, --since keeps the
// newer drops only, a node that could not be read is one line of its own,
// and a node that lost drops says how many.
func TestMergeAndPrintDrops(t *testing.T) {
	now := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	answers := []nodeAnswer{
		{Node: "node-2", Report: policydrops.Report{Node: "node-2", Lost: 7, Drops: []policydrops.Drop{
			{Time: at(20 * time.Minute), Direction: "ingress", Pod: "shop/web-0", HostVeth: "est1", Protocol: "tcp",
				Src: "10.78.0.9", Dst: "10.78.0.5", SrcPort: 40000, DstPort: 8080},
			{Time: at(2 * time.Minute), Direction: "egress", Pod: "shop/web-0", HostVeth: "est1", Policy: "cnp/deny-egress",
				Protocol: "udp", Src: "fd00::5", Dst: "fd00::9", SrcPort: 5353, DstPort: 53},
		}}},
		{Node: "node-1", Report: policydrops.Report{Node: "node-1", Drops: []policydrops.Drop{
			{Time: at(5 * time.Minute), Direction: "ingress", HostVeth: "est2", Protocol: "icmp", Src: "10.78.0.1", Dst: "10.78.0.2"},
		}}},
		{Node: "node-3", Err: errors.New(`node node-3: exec "/estuary-daemon policy-drops -o json" in pod kube-system/d: invalid configuration (a daemon older than the plugin has no policy-drops command)`)},
	}
	all := mergeDrops(answers, 0, now)
	var nodes []string
	for _, d := range all.Drops {
		nodes = append(nodes, d.Node)
	}
	if strings.Join(nodes, ",") != "node-2,node-1,node-2" {
		t.Errorf("merged order %v, want oldest first: node-2, node-1, node-2", nodes)
	}
	if len(all.Nodes) != 3 || all.Nodes[0].Node != "node-1" || all.Nodes[1].Lost != 7 || all.Nodes[1].Held != 2 || all.Nodes[2].Error == "" {
		t.Errorf("nodes %+v", all.Nodes)
	}
	recent := mergeDrops(answers, 10*time.Minute, now)
	if len(recent.Drops) != 2 || recent.Drops[0].Node != "node-1" || recent.Since != "10m0s" {
		t.Errorf("--since 10m kept %+v, want the two drops of the last 10 minutes", recent.Drops)
	}

	var b strings.Builder
	if err := writeDrops(&b, recent); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "TIME") {
		t.Fatalf("want a header, 2 drops and 2 node lines:\n%s", out)
	}
	for i, w := range [][]string{
		{"2026-12-07T14:55:00Z", "node-1", "ingress", "veth est2", "isolation", "icmp", "10.78.0.1 -> 10.78.0.2"},
		{"2026-12-07T14:58:00Z", "node-2", "egress", "shop/web-0", "cnp/deny-egress", "udp", "[fd00::5]:5353 -> [fd00::9]:53"},
	} {
		for _, f := range w {
			if !strings.Contains(lines[i+1], f) {
				t.Errorf("line %q lacks %q", lines[i+1], f)
			}
		}
	}
	requireIn(t, out, "node node-2: holds its last 2 drops; 7 older ones are no longer held", "no policy-drops command")

	var js dropsReport
	b.Reset()
	if err := report(&b, "json", all); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b.String()), &js); err != nil || len(js.Drops) != 3 || js.Drops[2].Policy != "cnp/deny-egress" || js.Drops[2].Node != "node-2" {
		t.Errorf("JSON %v: %s", err, b.String())
	}
	b.Reset()
	if err := writeDrops(&b, mergeDrops(answers[1:2], time.Minute, now)); err != nil || !strings.HasPrefix(b.String(), "no policy drops in the last 1m0s") {
		t.Errorf("no recent drops: %v %q", err, b.String())
	}
}

// policy drops execs `estuary-daemon policy-drops` in the daemon pod with
// the daemon's own flags; the test API server has no kubelet, so the exec
// fails: the node is reported with the command and the pod, and as no
// node answered the command fails.
func TestPolicyDropsReportsAnUnreadableNode(t *testing.T) {
	ns := namespace(t)
	daemonPod(t, ns, "drops-node")
	out, err := run(t, "", "policy", "drops", "--daemon-namespace", ns, "-o", "json", "--exec-timeout", "10s")
	if err == nil || !strings.Contains(err.Error(), "no node's daemon could be read") {
		t.Fatalf("policy drops with an unreadable daemon: %v, want it to say no daemon could be read\n%s", err, out)
	}
	var r dropsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("policy drops -o json: %v\n%s", err, out)
	}
	want := `node drops-node: exec "/estuary-daemon policy-drops -o json --node-name drops-node --health-address 127.0.0.1:9082" in pod ` + ns + "/estuary-daemon-drops-node: "
	if len(r.Nodes) != 1 || !strings.HasPrefix(r.Nodes[0].Error, want) || len(r.Drops) != 0 {
		t.Errorf("nodes %+v, want drops-node's error starting %q", r.Nodes, want)
	}
	if out, err := run(t, "", "policy", "drops", "--daemon-namespace", ns, "--node", "elsewhere"); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("--node without a daemon pod: %v\n%s", err, out)
	}
}

// A daemon older than the plugin takes the subcommand for a stray argument
// and refuses its configuration: the error says it lacks the command.
func TestOlderDaemonHint(t *testing.T) {
	if h := olderDaemonHint(errors.New("command terminated with exit code 1: invalid configuration: node name"), policyDropsCommand); !strings.Contains(h, "has no policy-drops command") {
		t.Errorf("hint %q", h)
	}
	if h := olderDaemonHint(errors.New("connection refused"), policyDropsCommand); h != "" {
		t.Errorf("hint for another error: %q", h)
	}
}
