package sysctl

import (
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/estuary-cni/estuary/test/infra/nstest"
)

func TestWriteInAnotherNamespaceLeavesTheCallerAlone(t *testing.T) {
	ns := nstest.New(t)
	before, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = before.Close() }()
	hostForward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")

	set := []Setting{{Key: "net/ipv4/ip_forward", Value: "1"}, {Key: "net/ipv4/conf/lo/forwarding", Value: "1"}}
	if err := Write(ns, set); err != nil {
		t.Fatal(err)
	}
	if err := Write(ns, set); err != nil {
		t.Fatalf("second write of the same values: %v", err)
	}
	got, err := Read(ns, "net/ipv4/conf/lo/forwarding")
	if err != nil || got != "1" {
		t.Fatalf("forwarding on lo in %s = %q (%v), want 1", ns, got, err)
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = after.Close() }()
	if !before.Equal(after) {
		t.Fatal("the calling thread changed network namespace")
	}
	if now, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(now) != string(hostForward) {
		t.Fatalf("the test's own namespace changed: ip_forward %q -> %q", hostForward, now)
	}
}

func TestWriteReportsEveryFailure(t *testing.T) {
	ns := nstest.New(t)
	err := Write(ns, []Setting{{Key: "net/ipv4/conf/nope1/forwarding", Value: "1"}, {Key: "net/ipv4/conf/nope2/forwarding", Value: "1"}})
	if err == nil || !strings.Contains(err.Error(), "nope1") || !strings.Contains(err.Error(), "nope2") {
		t.Fatalf("got %v; want both failures named", err)
	}
	if err := Write("/nonexistent/ns", nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/ns") {
		t.Fatalf("got %v; want an error naming the namespace path", err)
	}
}

func TestString(t *testing.T) {
	s := []Setting{{Key: "net/ipv4/ip_forward", Value: "1"}, {Key: "net/ipv6/conf/all/forwarding", Value: "1"}}
	if got := List(s); got != "net.ipv4.ip_forward=1,net.ipv6.conf.all.forwarding=1" {
		t.Fatalf("List = %q", got)
	}
}
