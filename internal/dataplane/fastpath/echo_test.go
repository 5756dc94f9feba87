package fastpath_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// forwardedEchoes counts, in host's FORWARD hook, the ICMP and ICMPv6 echo
// requests and replies the node forwards through netfilter, where a policy
// table would decide them; the returned function reads the count.
func forwardedEchoes(t *testing.T, host string) func() uint64 {
	t.Helper()
	nstest.Exec(t, host, "nft", "add table inet echoes; "+
		"add counter inet echoes seen; "+
		"add chain inet echoes seen_forwarded { type filter hook forward priority 0; }; "+
		"add rule inet echoes seen_forwarded icmp type { echo-request, echo-reply } counter name seen; "+
		"add rule inet echoes seen_forwarded icmpv6 type { echo-request, echo-reply } counter name seen")
	return func() uint64 {
		t.Helper()
		out := nstest.Exec(t, host, "nft", "-j", "list", "counter", "inet", "echoes", "seen")
		var doc struct {
			Nftables []struct {
				Counter *struct {
					Packets uint64 `json:"packets"`
				} `json:"counter"`
			} `json:"nftables"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("read nft's counter: %v (%q)", err, out)
		}
		for _, o := range doc.Nftables {
			if o.Counter != nil {
				return o.Counter.Packets
			}
		}
		t.Fatalf("nft listed no counter: %q", out)
		return 0
	}
}

// With policy enforced, no echo may skip netfilter, where the policy table
// decides it, once the program has settled; without, echoes between cluster
// addresses are forwarded by the program.
func TestEchoViaStack(t *testing.T) {
	for _, viaStack := range []bool{true, false} {
		t.Run(fmt.Sprintf("EchoViaStack=%v", viaStack), func(t *testing.T) {
			n := newNode(t)
			p := attachWith(t, n.tc, n.desired(false), fastpath.Options{EchoViaStack: viaStack, EchoSettle: 10 * time.Millisecond})
			if viaStack {
				waitEchoes(t, p, fastpath.EchoesViaStack)
			}
			seen := forwardedEchoes(t, n.host)
			before := stats(t, p)
			ping(t, n.podA, podB4) // pod to pod on the node
			ping(t, n.podA, ext6)  // IPv6, pod to external host
			d := delta(before, stats(t, p))
			got := seen()
			// 5 requests and 5 replies each way, each seen at the
			// ingress of the device it arrived on.
			if viaStack {
				if d.RedirectPeer+d.RedirectNeigh != 0 || d.PassConntrack < 20 {
					t.Errorf("verdicts %+v; want all 20 echoes passed to the stack, none redirected", d)
				}
				if got < 20 {
					t.Errorf("netfilter forwarded %d echoes; want all 20", got)
				}
				return
			}
			// Into the other pod, or, before the node has resolved its
			// neighbour, through the neighbour table.
			if d.RedirectPeer+d.RedirectNeigh < 20 {
				t.Errorf("verdicts %+v; want all 20 echoes redirected", d)
			}
			if got != 0 {
				t.Errorf("netfilter forwarded %d echoes; want none, the program forwards them", got)
			}
		})
	}
}

// waitEchoes waits until p's echoes are want.
func waitEchoes(t *testing.T, p *fastpath.Program, want fastpath.Echoes) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := p.Echoes()
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("echoes %d after 10s; want %d", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A program that enforces policy replaces, device by device, one that
// forwarded echoes. Midway, a request passes the old program (past
// conntrack) and its reply reaches the new one: were the reply sent to the
// stack, conntrack would find it invalid and the node's INVALID rule would
// drop it. So the new program starts with requests only and takes replies
// to the stack once it runs on every device.
func TestEchoesMoveToTheStackWithoutDroppingReplies(t *testing.T) {
	n := newNode(t)
	old := attachWith(t, n.tc, n.desired(false), fastpath.Options{})
	ping(t, n.podA, podB4)

	next := loadProgram(t, fastpath.Options{EchoViaStack: true, EchoSettle: time.Hour})
	t.Cleanup(func() { _ = next.Close() })
	if got, err := next.Echoes(); err != nil || got != fastpath.EchoRequestsViaStack {
		t.Fatalf("a program loaded for policy starts with echoes %d (err %v); want requests only (%d)", got, err, fastpath.EchoRequestsViaStack)
	}
	a, err := fastpath.NewAttacher(next, n.tc, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(n.desired(false)); err != nil {
		t.Fatal(err)
	}
	// Midway: pod A's veth still runs the old program, pod B's the new.
	if err := n.tc.AttachIngress(n.vethA, old.FD(), fastpath.Name); err != nil {
		t.Fatal(err)
	}
	ping(t, n.podA, podB4)

	// The hazard: replies to the stack now would be dropped.
	if err := next.SetEchoes(fastpath.EchoesViaStack); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "exec", filepath.Base(n.podA), "ping", "-c", "3", "-i", "0.05", "-W", "1", podB4).CombinedOutput(); err == nil {
		t.Fatalf("replies to requests the old program forwarded reached pod A through the stack; want them dropped as invalid:\n%s", out)
	}

	// Once the new program runs everywhere, every echo passes netfilter.
	if err := n.tc.AttachIngress(n.vethA, next.FD(), fastpath.Name); err != nil {
		t.Fatal(err)
	}
	seen := forwardedEchoes(t, n.host)
	ping(t, n.podA, podB4)
	if got := seen(); got < 10 {
		t.Errorf("netfilter forwarded %d echoes; want all 10", got)
	}
}
