package ops

import (
	"errors"
	"net"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

func TestAddVethPeerIn(t *testing.T) {
	hostPath, podPath := nstest.New(t), nstest.New(t)
	host, err := Open(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	pod, err := Open(podPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pod.Close)

	mac := net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}
	if err := host.AddVethPeerIn("esthost", mac, "net1", podPath, 1400); err != nil {
		t.Fatal(err)
	}
	if err := host.AddVethPeerIn("esthost", mac, "net1", podPath, 1400); err == nil {
		t.Error("second AddVethPeerIn with the same name succeeded")
	}
	hl, err := host.Link("esthost")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pod.Link("net1")
	if err != nil {
		t.Fatal(err)
	}
	if hl.Type != "veth" || hl.MAC.String() != mac.String() || hl.Up {
		t.Errorf("host end = %+v, want a down veth with MAC %s", hl, mac)
	}
	if pl.Type != "veth" || pl.PeerIndex != hl.Index || hl.PeerIndex != pl.Index {
		t.Errorf("ends do not point at each other: host %+v, pod %+v", hl, pl)
	}
	if _, err := host.Link("net1"); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("peer visible in the host namespace: %v", err)
	}
	for _, h := range []*Handle{host, pod} {
		name := map[*Handle]string{host: "esthost", pod: "net1"}[h]
		if err := h.SetLinkUp(name); err != nil {
			t.Fatal(err)
		}
		if err := h.SetLinkUp(name); err != nil {
			t.Fatal(err)
		}
		if l, err := h.Link(name); err != nil || !l.Up {
			t.Errorf("%s up = %+v, %v", name, l, err)
		}
	}
	if err := host.AddVethPeerIn("esthost2", nil, "net2", "/run/netns/esttest-missing", 0); err == nil {
		t.Error("AddVethPeerIn into a missing namespace succeeded")
	}
}

func TestAddOnlinkRoute(t *testing.T) {
	h := newNS(t)
	// The kernel judges an onlink gateway through the local table, which is
	// empty while lo is down.
	if err := h.SetLinkUp("lo"); err != nil {
		t.Fatal(err)
	}
	p := state.ProtocolEstuary
	def := state.Route{Dst: pfx("0.0.0.0/0"), Gw: ip("169.254.1.1"), Dev: "est1", Protocol: p}
	for range 2 { // a second write is a no-op
		if err := h.AddOnlinkRoute(def); err != nil {
			t.Fatal(err)
		}
	}
	has(t, canon(read(t, h).Routes), def.Canonical())
	if err := h.AddOnlinkRoute(state.Route{Dst: pfx("0.0.0.0/0"), Gw: ip("169.254.1.1"), Dev: "nosuch"}); err == nil {
		t.Error("route on a missing device succeeded")
	}
}
