package podipam

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

const addressesHelp = `# HELP estuary_ipam_addresses Addresses per subnet by state, each address in one state: used (allocated or retained), reserved (reserved for given workloads and not held) and available (free for any pod). A subnet's states sum to its capacity, plus the held addresses a configuration change left outside it.
# TYPE estuary_ipam_addresses gauge
`

const capacityHelp = `# HELP estuary_ipam_subnet_capacity_addresses Addresses a subnet can give pods: its range without the network, broadcast and gateway addresses and the excluded ones; reserved addresses are counted.
# TYPE estuary_ipam_subnet_capacity_addresses gauge
`

// statusWriterFor is a StatusWriter over alloc whose metrics go to reg; the
// Subnets are not in its client, so it writes metrics only.
func statusWriterFor(t *testing.T, alloc *ipam.Allocator, reg *prometheus.Registry) *StatusWriter {
	t.Helper()
	s := runtime.NewScheme()
	if err := estuaryv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	return &StatusWriter{Client: c, Alloc: alloc, Topology: NewTopology(c, c, alloc), Metrics: NewMetrics(reg),
		written: map[string]any{}}
}

// TestSubnetMetricsDoNotDoubleCount: a subnet's address states are disjoint
// (used, reserved, available) and sum to its capacity, which has a gauge of
// its own; an address a configuration change strands stays counted as used
// once, beside the smaller capacity; a removed subnet's series go.
func TestSubnetMetricsDoNotDoubleCount(t *testing.T) {
	alloc := ipam.New()
	a := netip.MustParseAddr
	cfg := ipam.SubnetConfig{Name: "m-a", Network: "n", Prefix: netip.MustParsePrefix("10.0.0.0/28"), Gateway: a("10.0.0.1"),
		Reserved: []ipam.Range{{First: a("10.0.0.10"), Last: a("10.0.0.11")}}}
	if err := alloc.AddSubnet(cfg); err != nil {
		t.Fatal(err)
	}
	if err := alloc.AddSubnet(ipam.SubnetConfig{Name: "m-b", Network: "n", Prefix: netip.MustParsePrefix("10.0.1.0/30")}); err != nil {
		t.Fatal(err)
	}
	var held []netip.Addr
	for _, owner := range []string{"pod-1", "pod-2", "pod-3"} {
		ip, err := alloc.AllocateIn("m-a", owner)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ip)
	}
	if err := alloc.Assign("m-a", a("10.0.0.10"), "pod-4"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	w := statusWriterFor(t, alloc, reg)
	w.writeAll(context.Background())

	// 10.0.0.0/28: 16 addresses less the network, broadcast and gateway
	// ones is 13; 4 held (one of them reserved), 1 reserved and free, 8
	// available: 4 + 1 + 8 = 13.
	want := capacityHelp + `estuary_ipam_subnet_capacity_addresses{subnet="m-a"} 13
estuary_ipam_subnet_capacity_addresses{subnet="m-b"} 2
` + addressesHelp + `estuary_ipam_addresses{state="available",subnet="m-a"} 8
estuary_ipam_addresses{state="reserved",subnet="m-a"} 1
estuary_ipam_addresses{state="used",subnet="m-a"} 4
estuary_ipam_addresses{state="available",subnet="m-b"} 2
estuary_ipam_addresses{state="reserved",subnet="m-b"} 0
estuary_ipam_addresses{state="used",subnet="m-b"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"estuary_ipam_addresses", "estuary_ipam_subnet_capacity_addresses"); err != nil {
		t.Fatal(err)
	}

	// Excluding a held address strands it: out of the capacity, still used.
	cfg.Excluded = []ipam.Range{{First: held[0], Last: held[0]}}
	if err := alloc.UpdateSubnet(cfg); err != nil {
		t.Fatal(err)
	}
	if err := alloc.RemoveSubnet("m-b"); err != nil {
		t.Fatal(err)
	}
	w.writeAll(context.Background())
	st, err := alloc.Stats("m-a")
	if err != nil || st.Stranded != 1 {
		t.Fatalf("stats %+v, %v; want one stranded address", st, err)
	}
	want = capacityHelp + `estuary_ipam_subnet_capacity_addresses{subnet="m-a"} 12
` + addressesHelp + `estuary_ipam_addresses{state="available",subnet="m-a"} 8
estuary_ipam_addresses{state="reserved",subnet="m-a"} 1
estuary_ipam_addresses{state="used",subnet="m-a"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"estuary_ipam_addresses", "estuary_ipam_subnet_capacity_addresses"); err != nil {
		t.Fatal(err)
	}
}

func TestReservedFree(t *testing.T) {
	for _, c := range []struct {
		st   ipam.Stats
		want uint64
	}{
		{ipam.Stats{Total: 13, Reserved: 2, Used: 4, Available: 8}, 1},
		{ipam.Stats{Total: 12, Reserved: 2, Used: 4, Stranded: 1, Available: 8}, 1},
		{ipam.Stats{Total: 10, Used: 10}, 0},
		{ipam.Stats{Total: 1, Used: 5, Available: 1}, 0}, // never below zero
	} {
		if got := reservedFree(c.st); got != c.want {
			t.Errorf("reservedFree(%+v) = %d, want %d", c.st, got, c.want)
		}
	}
}
