package ops

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/test/infra/nstest"
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
	peerMAC := net.HardwareAddr{0x02, 0x42, 0x0a, 0x00, 0x00, 0x07}
	if err := host.Devices().AddVethPeerIn("esthost", mac, "net1", peerMAC, podPath, 1400); err != nil {
		t.Fatal(err)
	}
	if err := host.Devices().AddVethPeerIn("esthost", mac, "net1", peerMAC, podPath, 1400); err == nil {
		t.Error("second AddVethPeerIn with the same name succeeded")
	}
	hl, err := host.Links().Get("esthost")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pod.Links().Get("net1")
	if err != nil {
		t.Fatal(err)
	}
	if hl.Type != "veth" || hl.MAC.String() != mac.String() || hl.Up {
		t.Errorf("host end = %+v, want a down veth with MAC %s", hl, mac)
	}
	if pl.MAC.String() != peerMAC.String() {
		t.Errorf("pod end MAC = %s, want %s", pl.MAC, peerMAC)
	}
	if pl.Type != "veth" || pl.PeerIndex != hl.Index || hl.PeerIndex != pl.Index {
		t.Errorf("ends do not point at each other: host %+v, pod %+v", hl, pl)
	}
	if _, err := host.Links().Get("net1"); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("peer visible in the host namespace: %v", err)
	}
	for _, h := range []*Handle{host, pod} {
		name := map[*Handle]string{host: "esthost", pod: "net1"}[h]
		if err := h.Links().SetUp(name); err != nil {
			t.Fatal(err)
		}
		if err := h.Links().SetUp(name); err != nil {
			t.Fatal(err)
		}
		if l, err := h.Links().Get(name); err != nil || !l.Up {
			t.Errorf("%s up = %+v, %v", name, l, err)
		}
	}
	if err := host.Devices().AddVethPeerIn("esthost2", nil, "net2", nil, "/run/netns/esttest-missing", 0); err == nil {
		t.Error("AddVethPeerIn into a missing namespace succeeded")
	}
}

// TestAddVethPeerInKernelMAC: without a peer MAC the kernel picks one.
func TestAddVethPeerInKernelMAC(t *testing.T) {
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
	if err := host.Devices().AddVethPeerIn("esthost", nil, "net1", nil, podPath, 0); err != nil {
		t.Fatal(err)
	}
	pl, err := pod.Links().Get("net1")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := desired.MACFrom(pl.MAC); err != nil || m.IsZero() || m.IsMulticast() {
		t.Errorf("pod end MAC = %s (%v), want a unicast address the kernel chose", pl.MAC, err)
	}
}

// TestSetLinkMAC changes a veth's address while it is up, and accepts the
// address it already has.
func TestSetLinkMAC(t *testing.T) {
	h := newNS(t)
	if err := h.Devices().EnsureVeth("estmac", "estmacp", 0); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x10, 0x01}
	for i := range 2 {
		if err := h.Links().SetMAC("estmac", mac); err != nil {
			t.Fatalf("SetLinkMAC %d: %v", i+1, err)
		}
	}
	l, err := h.Links().Get("estmac")
	if err != nil {
		t.Fatal(err)
	}
	if !l.Up || l.MAC.String() != mac.String() {
		t.Errorf("link = %+v, want it up with MAC %s", l, mac)
	}
	if err := h.Links().SetMAC("estnone", mac); err == nil || !strings.Contains(err.Error(), "estnone") {
		t.Errorf("SetLinkMAC of a missing link = %v, want an error naming it", err)
	}
}

func TestAddOnlinkRoute(t *testing.T) {
	h := newNS(t)
	// The kernel judges an onlink gateway through the local table, which is
	// empty while lo is down.
	if err := h.Links().SetUp("lo"); err != nil {
		t.Fatal(err)
	}
	p := desired.ProtocolEstuary
	def := desired.Route{Dst: pfx("0.0.0.0/0"), Gw: ip("169.254.1.1"), Dev: "est1", Protocol: p}
	for range 2 { // a second write is a no-op
		if err := h.Routes().AddOnlink(def); err != nil {
			t.Fatal(err)
		}
	}
	has(t, canon(read(t, h).Routes), def.Canonical())
	if err := h.Routes().AddOnlink(desired.Route{Dst: pfx("0.0.0.0/0"), Gw: ip("169.254.1.1"), Dev: "nosuch"}); err == nil {
		t.Error("route on a missing device succeeded")
	}
}
