package ops

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// vlanHandle returns a handle on a fresh namespace holding a veth pair
// up0 <-> up1, up0 serving as the parent NIC.
func vlanHandle(t *testing.T) *Handle {
	t.Helper()
	h, err := Open(nstest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if err := h.Devices().EnsureVeth("up0", "up1", 0); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestEnsureVLAN creates, keeps, lists and deletes a tagged sub-interface.
// Kernels without 802.1Q support make it skip with that reason.
func TestEnsureVLAN(t *testing.T) {
	h := vlanHandle(t)
	err := h.VLANs().Ensure("up0", 100, "up0.100")
	if VLANUnsupported(err) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := h.VLANs().Ensure("up0", 100, "up0.100"); err != nil {
		t.Fatalf("second EnsureVLAN: %v", err)
	}
	l, err := h.Links().Get("up0.100")
	if err != nil || l.Type != "vlan" || l.Up {
		t.Fatalf("link = %+v, %v; want a down vlan", l, err)
	}
	vs, err := h.VLANs().List()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0] != (VLANLink{Name: "up0.100", Parent: "up0", ID: 100, Marked: true}) {
		t.Errorf("VLANLinks = %+v", vs)
	}
	// A marked link with another id is re-created with the wanted one.
	if err := h.VLANs().Ensure("up0", 200, "up0.100"); err != nil {
		t.Fatal(err)
	}
	if vs, _ := h.VLANs().List(); len(vs) != 1 || vs[0].ID != 200 {
		t.Errorf("after id change: %+v", vs)
	}
	if err := h.VLANs().DeleteMarked("up0.100"); err != nil {
		t.Fatal(err)
	}
	if err := h.VLANs().DeleteMarked("up0.100"); err != nil {
		t.Fatalf("deleting a gone link: %v", err)
	}
	if _, err := h.Links().Get("up0.100"); !errors.Is(err, ErrLinkNotFound) {
		t.Errorf("link left: %v", err)
	}
}

// TestEnsureVLANRefusesForeign: a link of the wanted name that is not an
// 802.1Q link estuary made is never replaced or deleted. This needs no
// 802.1Q support.
func TestEnsureVLANRefusesForeign(t *testing.T) {
	h := vlanHandle(t)
	if err := h.Devices().EnsureVeth("up0.7", "peer7", 0); err != nil {
		t.Fatal(err)
	}
	err := h.VLANs().Ensure("up0", 7, "up0.7")
	if err == nil || !strings.Contains(err.Error(), "not estuary's") {
		t.Errorf("EnsureVLAN over a veth = %v, want a refusal", err)
	}
	if err := h.VLANs().DeleteMarked("up0.7"); err == nil {
		t.Error("DeleteMarkedVLAN deleted a veth")
	}
	if l, err := h.Links().Get("up0.7"); err != nil || l.Type != "veth" {
		t.Errorf("foreign link changed: %+v, %v", l, err)
	}
}

func TestEnsureVLANArguments(t *testing.T) {
	h := vlanHandle(t)
	for _, tc := range []struct {
		parent, name string
		id           int
		want         string
	}{
		{"up0", "up0.0", 0, "out of range"},
		{"up0", "up0.4095", 4095, "out of range"},
		{"up0", "a-name-of-16-byt", 5, "name must be"},
		{"nic9", "nic9.5", 5, "parent nic9"},
	} {
		err := h.VLANs().Ensure(tc.parent, tc.id, tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("EnsureVLAN(%s, %d, %s) = %v, want %q", tc.parent, tc.id, tc.name, err, tc.want)
		}
	}
}

func TestVLANUnsupported(t *testing.T) {
	if !VLANUnsupported(fmt.Errorf("add: %w", unix.EOPNOTSUPP)) || !VLANUnsupported(ErrVLANUnsupported) {
		t.Error("not recognised")
	}
	if VLANUnsupported(unix.EEXIST) || VLANUnsupported(nil) {
		t.Error("false positive")
	}
}
