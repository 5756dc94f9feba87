package ipam

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

// TestConcurrentNoDuplicates runs many goroutines allocating, assigning,
// retaining and releasing on shared subnets while subnets are added and removed,
// and checks that no address is ever held twice.
func TestConcurrentNoDuplicates(t *testing.T) {
	a := newWith(t,
		SubnetConfig{Name: "a-v4", Network: "n", Prefix: pfx("10.0.0.0/24")},
		SubnetConfig{Name: "b-v4", Network: "n", Prefix: pfx("10.0.1.0/24")},
		SubnetConfig{Name: "v6", Network: "n", Prefix: pfx("fd00::/64")},
	)
	const workers, rounds = 16, 400
	type key struct {
		subnet string
		addr   netip.Addr
	}
	var claims sync.Map // key -> owner
	claim := func(k key, owner string) {
		if prev, dup := claims.LoadOrStore(k, owner); dup {
			t.Errorf("%s %s handed to %s while held by %s", k.subnet, k.addr, owner, prev)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", w)
			var mine []key
			for i := range rounds {
				switch i % 4 {
				case 0, 1:
					ls, err := a.Allocate(Request{Owner: owner, Network: "n", Families: []family.Family{family.IPv4, family.IPv6}})
					if err != nil {
						continue // exhaustion is fine under contention
					}
					for _, l := range ls {
						k := key{l.Subnet, l.Addr}
						claim(k, owner)
						mine = append(mine, k)
					}
				case 2:
					addr := netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + (w*rounds+i)%254)})
					if a.Assign("a-v4", addr, owner) == nil {
						k := key{"a-v4", addr}
						if prev, held := claims.Load(k); !held {
							claim(k, owner)
							mine = append(mine, k)
						} else if prev != owner { // a re-assign of our own is a no-op
							t.Errorf("%s assigned to %s while held by %s", addr, owner, prev)
						}
					}
				case 3:
					if len(mine) == 0 {
						continue
					}
					k := mine[0]
					mine = mine[1:]
					if i%8 == 3 {
						if err := a.Retain(k.subnet, k.addr, owner); err != nil {
							t.Errorf("retain: %v", err)
						}
					}
					claims.Delete(k)
					if err := a.Release(k.subnet, k.addr, owner); err != nil {
						t.Errorf("release: %v", err)
					}
				}
				if i%50 == 0 {
					_, _ = a.NetworkStats("n", family.IPv4)
				}
			}
		})
	}
	wg.Go(func() { // churn the index copy-on-write
		for i := range 200 {
			name := fmt.Sprintf("tmp-%d", i)
			if err := a.AddSubnet(SubnetConfig{Name: name, Network: "tmp", Prefix: pfx("192.168.0.0/24")}); err != nil {
				t.Errorf("add: %v", err)
			}
			_ = a.Records()
			if err := a.RemoveSubnet(name); err != nil {
				t.Errorf("remove: %v", err)
			}
		}
	})
	wg.Wait()

	// The allocator's records are exactly the claims that are still open.
	seen := map[key]bool{}
	for _, r := range a.Records() {
		k := key{r.Subnet, r.Addr}
		if seen[k] {
			t.Fatalf("duplicate record %v", r)
		}
		seen[k] = true
		if owner, ok := claims.Load(k); !ok || owner != r.Owner {
			t.Fatalf("record %v not claimed (claim %v)", r, owner)
		}
	}
	claims.Range(func(k, _ any) bool {
		if !seen[k.(key)] {
			t.Errorf("claim %v missing from records", k)
		}
		return true
	})
}
