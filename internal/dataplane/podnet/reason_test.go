package podnet

import (
	"context"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/pkg/family"
)

// TestAddRefusalReasons: an Add whose records cannot be used fails as
// ipam_refused, before any namespace is opened; one whose runtime gives up
// during the wait fails as canceled, not as a timeout of the manager.
func TestAddRefusalReasons(t *testing.T) {
	addrs := NewStatic()
	b, err := New(Config{HostNetns: "/nonexistent/host", Addresses: addrs, AddressTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string) cniserver.Attachment {
		return cniserver.Attachment{ContainerID: "c-" + name, IfName: "eth0", Netns: "/nonexistent/" + name,
			PodNamespace: "default", PodName: name, PodUID: "uid-" + name}
	}
	pinned := func(s, mac string) Address {
		a := addr(s)
		a.MAC = state.MustParseMAC(mac)
		return a
	}
	addrs.Set("default", "none")
	addrs.Set("default", "badfamily", Address{IP: addr("10.0.0.1/24").IP, Family: family.IPv6})
	addrs.Set("default", "twomacs", pinned("10.0.0.2/24", "02:00:00:00:00:01"), pinned("fd00::2/64", "02:00:00:00:00:02"))
	for _, name := range []string{"none", "badfamily", "twomacs"} {
		_, err := b.Add(context.Background(), pod(name))
		if r := cniserver.ReasonOf(err); err == nil || r != cniserver.ReasonIPAMRefused {
			t.Errorf("Add of pod %s = %v (reason %s), want %s", name, err, r, cniserver.ReasonIPAMRefused)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.Add(ctx, pod("gone"))
	if r := cniserver.ReasonOf(err); err == nil || r != cniserver.ReasonCanceled {
		t.Errorf("Add with the runtime's context canceled = %v (reason %s), want %s", err, r, cniserver.ReasonCanceled)
	}
}
