package fastpath_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
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
// decides it; without, echoes between cluster addresses are forwarded by
// the program.
func TestEchoViaStack(t *testing.T) {
	for _, viaStack := range []bool{true, false} {
		t.Run(fmt.Sprintf("EchoViaStack=%v", viaStack), func(t *testing.T) {
			n := newNode(t)
			p := attachWith(t, n.tc, n.desired(false), fastpath.Options{EchoViaStack: viaStack})
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
