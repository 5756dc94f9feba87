package ipwait

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Address is one of a pod's addresses as IPAM allocated it.
type Address struct {
	// IP is the pod's address with its subnet's prefix length.
	IP netip.Prefix
	// Gateway is the subnet's gateway; the pod itself always routes via the
	// link-local gateway, so this is informational.
	Gateway netip.Addr
	Family  family.Family
	// Underlay says the address is on an Underlay network: its packets leave
	// through the node's uplink as they are, with no tunnel header.
	Underlay bool
	// Network and Subnet name the address's network and subnet.
	Network, Subnet string
	// Segment is set when the address lies on a VLAN segment this node is
	// attached to (a VLAN-mode Underlay network whose domain holds the
	// node): the address is then checked and announced on that segment
	// before the pod starts (package segment).
	Segment *Segment
	// MAC is the MAC address the address's record fixes for the pod's
	// interface (pinned); zero when it fixes none and the kernel chooses.
	// Every address of a pod pins the same MAC, or none does.
	MAC desired.MAC
}

// Segment is the VLAN segment an underlay address lives on, as the node
// reaches it: the 802.1Q id on the uplink (0: untagged).
type Segment struct {
	VLAN int
}

// SessionError marks a wait that failed on the node's BGP sessions, not on
// the pod's records: the pod's address would not be announced.
type SessionError struct {
	Err error
}

func (e *SessionError) Error() string { return e.Err.Error() }

// Unwrap returns the wait's error.
func (e *SessionError) Unwrap() error { return e.Err }

// Static is a map-backed source of pods' addresses for tests and fixed
// setups, with Waiter's Wait. Wait polls until Set has supplied the pod's
// addresses or ctx ends.
type Static struct {
	mu    sync.Mutex
	addrs map[string][]Address
}

// NewStatic returns an empty Static.
func NewStatic() *Static {
	return &Static{addrs: map[string][]Address{}}
}

// Set records the addresses of the pod namespace/name, replacing any before.
func (s *Static) Set(podNamespace, podName string, addrs ...Address) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs[podNamespace+"/"+podName] = addrs
}

// Delete forgets the pod's addresses.
func (s *Static) Delete(podNamespace, podName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.addrs, podNamespace+"/"+podName)
}

func (s *Static) get(key string) ([]Address, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.addrs[key]
	return a, ok
}

// Wait returns the pod's addresses once Set has supplied them.
func (s *Static) Wait(ctx context.Context, podNamespace, podName, _ string) ([]Address, error) {
	key := podNamespace + "/" + podName
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if a, ok := s.get(key); ok {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("addresses of pod %s: %w", key, ctx.Err())
		case <-tick.C:
		}
	}
}
