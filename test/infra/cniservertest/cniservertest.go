// Package cniservertest owns test helpers for the CNI server: an in-memory
// Backend that hands out addresses without touching the kernel, and Start,
// which runs a real server on a unix socket in a temporary directory.
package cniservertest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// Backend is an in-memory cniserver.Backend. Addresses come from
// 10.244.0.0/16 in order; each attachment gets one /32, a default route via
// 169.254.1.1 and a host and a container interface.
type Backend struct {
	mu       sync.Mutex
	next     netip.Addr
	attached map[endpointstore.Key]string
	adds     int
	dels     int

	// NotReady, when set, is returned by Ready.
	NotReady error
	// FailAdd and FailDel, when set, are returned by Add and Del.
	FailAdd, FailDel error
}

// NewBackend returns an empty Backend.
func NewBackend() *Backend {
	return &Backend{next: netip.MustParseAddr("10.244.0.2"), attached: map[endpointstore.Key]string{}}
}

// Add records the attachment and returns its configuration.
func (b *Backend) Add(_ context.Context, a cniserver.Attachment) (*cniv1.AddReply, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.FailAdd != nil {
		return nil, b.FailAdd
	}
	ip := b.next
	b.next = ip.Next()
	b.adds++
	b.attached[endpointstore.Key{ContainerID: a.ContainerID, IfName: a.IfName}] = a.Netns
	idx := int32(1)
	return &cniv1.AddReply{
		Interfaces: []*cniv1.Interface{
			{Name: hostIfName(a.ContainerID), Mac: "ee:ee:ee:ee:ee:ee", Mtu: 1450},
			{Name: a.IfName, Mac: macFor(ip), Mtu: 1450, Sandbox: a.Netns},
		},
		Ips:    []*cniv1.IPConfig{{Interface: &idx, Address: netip.PrefixFrom(ip, 32).String(), Gateway: "169.254.1.1"}},
		Routes: []*cniv1.Route{{Dst: "0.0.0.0/0", Gw: "169.254.1.1"}},
		Dns:    &cniv1.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"svc.cluster.local"}},
	}, nil
}

// Del forgets the attachment; unknown attachments succeed.
func (b *Backend) Del(_ context.Context, a cniserver.Attachment) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.FailDel != nil {
		return b.FailDel
	}
	b.dels++
	delete(b.attached, endpointstore.Key{ContainerID: a.ContainerID, IfName: a.IfName})
	return nil
}

// Check reports an attachment the backend does not hold.
func (b *Backend) Check(_ context.Context, a cniserver.Attachment, _ endpointstore.Endpoint) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.attached[endpointstore.Key{ContainerID: a.ContainerID, IfName: a.IfName}]; !ok {
		return errors.New("interface is not present")
	}
	return nil
}

// Ready returns NotReady.
func (b *Backend) Ready(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.NotReady
}

// Attached reports whether the backend holds the attachment.
func (b *Backend) Attached(containerID, ifname string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.attached[endpointstore.Key{ContainerID: containerID, IfName: ifname}]
	return ok
}

// Calls returns how many Add and Del calls succeeded.
func (b *Backend) Calls() (adds, dels int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.adds, b.dels
}

// SetNotReady sets NotReady under the backend's lock.
func (b *Backend) SetNotReady(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.NotReady = err
}

func hostIfName(containerID string) string {
	if len(containerID) > 11 {
		containerID = containerID[:11]
	}
	return "est" + containerID
}

func macFor(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("02:42:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// Paths returns a socket and state path in a fresh temporary directory.
func Paths(tb testing.TB) (socket, state string) {
	tb.Helper()
	dir := tb.TempDir()
	return filepath.Join(dir, "run", "cni.sock"), filepath.Join(dir, "lib", "state.db")
}

// Start runs a server with backend on the given paths until the test ends.
func Start(tb testing.TB, backend cniserver.Backend, socket, state string) *cniserver.Server {
	tb.Helper()
	return StartConfig(tb, cniserver.Config{SocketPath: socket, StatePath: state, Backend: backend})
}

// StartConfig is Start with the whole server configuration.
func StartConfig(tb testing.TB, cfg cniserver.Config) *cniserver.Server {
	tb.Helper()
	srv, err := cniserver.New(cfg)
	if err != nil {
		tb.Fatalf("start CNI server: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	tb.Cleanup(func() {
		if err := srv.Close(); err != nil {
			tb.Errorf("close CNI server: %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return srv
}
