package nodesnap

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestNormaliseDropsWhatChangesByItself(t *testing.T) {
	a := normalise("7: estvx4: <BROADCAST,UP> mtu 1450 qdisc noqueue state UNKNOWN group default qlen 1000\\    link/ether 02:00:00:00:00:01\n" +
		"3: lan0@if4: <UP> mtu 1500 link-netnsid 0\n")
	b := normalise("9: lan0@if12: <UP> mtu 1500 link-netnsid 3\n" +
		"8: estvx4: <BROADCAST,UP> mtu 1450 qdisc noqueue state UNKNOWN group default qlen 1000\\    link/ether 02:00:00:00:00:01\n")
	if !slices.Equal(a, b) {
		t.Fatalf("the same links listed in another order with other indexes differ:\n%q\n%q", a, b)
	}
	if addr := normalise("2: lan0    inet 10.0.0.1/24 scope global lan0\\       valid_lft forever preferred_lft 3600sec"); addr[0] != "lan0 inet 10.0.0.1/24 scope global lan0" {
		t.Fatalf("address line = %q", addr[0])
	}
}

func TestDiffNamesEachChangeBySection(t *testing.T) {
	before := Snapshot{"rules4": {"0: from all lookup local"}, "files /x": {"missing /x"}}
	after := Snapshot{"rules4": {"0: from all lookup local", "1000: from all lookup 1000"}, "files /x": {"d 755 0 /x"}}
	got := Diff(before, after)
	want := []string{"files /x: - missing /x", "files /x: + d 755 0 /x", "rules4: + 1000: from all lookup 1000"}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff = %q, want %q", got, want)
	}
	if d := Diff(before, before); len(d) != 0 {
		t.Fatalf("Diff of a snapshot with itself = %q", d)
	}
}

func TestTakeRunsEverySection(t *testing.T) {
	var ran []string
	run := func(_ context.Context, argv ...string) (string, error) {
		ran = append(ran, strings.Join(argv, " "))
		return "", nil
	}
	s, err := Take(context.Background(), run, Options{Paths: []string{"/etc/cni/net.d"}, Sysctls: `^net\.ipv4\.ip_forward$`})
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != len(sections)+2 {
		t.Fatalf("snapshot has %d sections, want %d", len(s), len(sections)+2)
	}
	if !slices.ContainsFunc(ran, func(c string) bool { return strings.HasPrefix(c, "sysctl -a -r") }) {
		t.Fatalf("sysctls not read: %q", ran)
	}
}
