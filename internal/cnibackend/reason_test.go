package cnibackend

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/pkg/family"
)

// TestAddRefusalReasons: an Add whose records cannot be used fails as
// ipam_refused, before any namespace is opened; one whose runtime gives up
// during the wait fails as canceled, not as a timeout of the manager.
func TestAddRefusalReasons(t *testing.T) {
	addrs := ipwait.NewStatic()
	b, err := New(Config{Plumber: podnet.NewPlumber("/nonexistent/host"), Addresses: addrs, AddressTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string) cniserver.Attachment {
		return cniserver.Attachment{ContainerID: "c-" + name, IfName: "eth0", Netns: "/nonexistent/" + name,
			PodNamespace: "default", PodName: name, PodUID: "uid-" + name}
	}
	pinned := func(s, mac string) ipwait.Address {
		a := addr(s)
		a.MAC = desired.MustParseMAC(mac)
		return a
	}
	addrs.Set("default", "none")
	addrs.Set("default", "badfamily", ipwait.Address{IP: addr("10.0.0.1/24").IP, Family: family.IPv6})
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

// sessionWait fails every wait as ipwait's BGP gate does.
type sessionWait struct{}

func (sessionWait) Wait(context.Context, string, string, string) ([]ipwait.Address, error) {
	return nil, &ipwait.SessionError{Err: fmt.Errorf("network fabric: no Established session: %w", context.DeadlineExceeded)}
}

// TestAddBGPSessionReason: an Add whose wait failed on the node's BGP
// sessions fails as bgp_session, not as a timeout or a refusal of IPAM.
func TestAddBGPSessionReason(t *testing.T) {
	b, err := New(Config{Plumber: podnet.NewPlumber("/nonexistent/host"), Addresses: sessionWait{}, AddressTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a := cniserver.Attachment{ContainerID: "c-bgp", IfName: "eth0", Netns: "/nonexistent/bgp", PodNamespace: "default",
		PodName: "bgp", PodUID: "uid-bgp"}
	_, err = b.Add(context.Background(), a)
	if r := cniserver.ReasonOf(err); err == nil || r != cniserver.ReasonBGPSession || !strings.Contains(err.Error(), "pod default/bgp") {
		t.Errorf("Add = %v (reason %s), want %s naming pod default/bgp", err, r, cniserver.ReasonBGPSession)
	}
}
