package translate

import (
	"fmt"
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// BenchmarkNeighTable50k is one pass's neighbour table at make scale's
// size: 1,000 nodes and 50,000 Bound records.
func BenchmarkNeighTable50k(b *testing.B) {
	var objs Objects
	for i := range 1000 {
		n := objtest.Node(fmt.Sprintf("node-%d", i),
			fmt.Sprintf("10.90.%d.%d", i/250, 1+i%250), fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256))
		objs.Nodes = append(objs.Nodes, &n)
	}
	for i := range 50000 {
		r := objtest.Instance(fmt.Sprintf("10.%d.%d.%d/16", 78+i/65000, (i/250)%256, 1+i%250),
			fmt.Sprintf("node-%d", i%1000), estuaryv1.IPInstanceBound)
		objs.Records = append(objs.Records, remote.FromInstance(&r))
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(NeighTable("node-0", objs)); n < 49000 {
			b.Fatalf("%d entries", n)
		}
	}
}
