package daemon

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
)

// The fast path's collector exports which echoes the program leaves to the
// stack, as the program holds it.
func TestFastPathCollectorExportsEchoes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading a BPF program needs root")
	}
	p, err := fastpath.Load(fastpath.Options{EchoViaStack: true})
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("the kernel cannot load the fast path: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := newFastPathCollector(p)
	want := func(v int) string {
		return "# HELP estuary_fastpath_echoes_via_stack Which ICMP echoes between cluster addresses the fast path leaves to the kernel's stack, " +
			"where the policy table decides them: 0 none (policy off), 1 requests only (a program just started, replacing the previous one), 2 all.\n" +
			"# TYPE estuary_fastpath_echoes_via_stack gauge\n" +
			"estuary_fastpath_echoes_via_stack " + strconv.Itoa(v) + "\n"
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want(1)), "estuary_fastpath_echoes_via_stack"); err != nil {
		t.Errorf("a program just loaded for policy: %v", err)
	}
	if err := p.SetEchoes(fastpath.EchoesViaStack); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want(2)), "estuary_fastpath_echoes_via_stack"); err != nil {
		t.Errorf("after the attacher raised it: %v", err)
	}
}
