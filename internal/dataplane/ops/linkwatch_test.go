package ops

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// awaitName reads names until want comes and returns those that came
// before it.
func awaitName(t *testing.T, names <-chan string, want string) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var before []string
	for {
		select {
		case n := <-names:
			if n == want {
				return before
			}
			before = append(before, n)
		case <-deadline:
			t.Fatalf("no change reported for %s; got %v", want, before)
		}
	}
}

func TestWatchLinks(t *testing.T) {
	ns := nstest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	names := make(chan string, 1024)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- WatchLinks(ctx, ns, func() { close(ready) }, func(name string) { names <- name })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("WatchLinks returned before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("WatchLinks not ready")
	}
	// Events of one kind arrive in order: once a marker link's change is
	// seen, every earlier change of that kind has been read.
	marks := 0
	mark := func() {
		marks++
		name := "mark" + string(rune('0'+marks))
		nstest.IP(t, ns, "link", "add", name, "type", "veth", "peer", "name", name+"p")
		awaitName(t, names, name)
	}

	nstest.IP(t, ns, "link", "add", "wl0", "type", "veth", "peer", "name", "wl0p")
	awaitName(t, names, "wl0")
	nstest.IP(t, ns, "link", "set", "wl0", "up")
	awaitName(t, names, "wl0")
	nstest.IP(t, ns, "link", "set", "wl0", "down")
	awaitName(t, names, "wl0")

	// Addresses: an address of universe scope is reported by its link's
	// name, one of link scope is not. wl1 stays down, so adding an address
	// makes no link event of its own.
	nstest.IP(t, ns, "link", "add", "wl1", "type", "veth", "peer", "name", "wl1p")
	nstest.IP(t, ns, "link", "add", "wl2", "type", "veth", "peer", "name", "wl2p")
	mark()
	nstest.IP(t, ns, "addr", "add", "192.0.2.1/24", "dev", "wl1")
	if before := awaitName(t, names, "wl1"); len(before) != 0 {
		t.Errorf("changes before wl1's address: %v", before)
	}
	nstest.IP(t, ns, "addr", "add", "198.51.100.1/32", "dev", "wl2", "scope", "link")
	nstest.IP(t, ns, "addr", "add", "203.0.113.1/24", "dev", "wl1")
	if before := awaitName(t, names, "wl1"); slices.Contains(before, "wl2") {
		t.Errorf("a link-scope address was reported: %v", before)
	}
	nstest.IP(t, ns, "addr", "del", "192.0.2.1/24", "dev", "wl1")
	awaitName(t, names, "wl1")

	// A deleted link is reported by the name it had.
	mark()
	nstest.IP(t, ns, "link", "del", "wl0")
	awaitName(t, names, "wl0")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WatchLinks after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchLinks did not return after its context ended")
	}
}

func TestWatchLinksNoNamespace(t *testing.T) {
	err := WatchLinks(context.Background(), "/run/netns/esttest-missing", nil, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "esttest-missing") {
		t.Fatalf("WatchLinks in a missing namespace: %v", err)
	}
}
