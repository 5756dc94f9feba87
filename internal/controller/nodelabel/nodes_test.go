package nodelabel

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

func TestLabelsFollowNetworksNodesAndAvailability(t *testing.T) {
	startManager(t)
	newNode(t, "nl-a", map[string]string{"rack": "ra", "team": "x",
		netmodel.Prefix + "network-gone": netmodel.ValueAttached, netmodel.Prefix + "zone": "keep"})
	newNode(t, "nl-b", map[string]string{"rack": "rb"})
	newNetwork(t, "nl-ov", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay})
	newSubnet(t, "nl-ov4", "nl-ov", "10.80.0.0/24", 4)
	newNetwork(t, "nl-u", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, NodeSelector: map[string]string{"rack": "ra"}})
	newSubnet(t, "nl-u4", "nl-u", "10.81.0.0/24", 4)

	ov := map[string]string{netmodel.NetworkKey("nl-ov"): netmodel.ValueAttached, netmodel.AvailableKey("nl-ov", family.IPv4): netmodel.ValueTrue, netmodel.AvailableKey("nl-ov", family.IPv6): netmodel.ValueFalse}
	u := map[string]string{netmodel.NetworkKey("nl-u"): netmodel.ValueAttached, netmodel.AvailableKey("nl-u", family.IPv4): netmodel.ValueTrue, netmodel.AvailableKey("nl-u", family.IPv6): netmodel.ValueFalse}
	uKeys := []string{netmodel.NetworkKey("nl-u"), netmodel.AvailableKey("nl-u", family.IPv4), netmodel.AvailableKey("nl-u", family.IPv6)}

	// The overlay everywhere, the underlay on its domain; a stale managed
	// key goes, foreign labels and unmanaged estuary keys stay.
	waitLabels(t, "nl-a", merge(ov, u, map[string]string{"rack": "ra", "team": "x", netmodel.Prefix + "zone": "keep"}), netmodel.Prefix+"network-gone")
	waitLabels(t, "nl-b", merge(ov, map[string]string{"rack": "rb"}), uKeys...)

	// The network's domain moves to rack rb.
	setSelector(t, "nl-u", map[string]string{"rack": "rb"})
	waitLabels(t, "nl-b", merge(ov, u))
	waitLabels(t, "nl-a", ov, uKeys...)

	// The node moves instead.
	relabel(t, "nl-a", "rack", "rb")
	waitLabels(t, "nl-a", merge(ov, u, map[string]string{"team": "x"}))

	// The underlay's only subnet fills up, then frees an address.
	setAvailable(t, "nl-u4", "0")
	waitLabels(t, "nl-a", map[string]string{netmodel.AvailableKey("nl-u", family.IPv4): netmodel.ValueFalse})
	waitLabels(t, "nl-b", map[string]string{netmodel.AvailableKey("nl-u", family.IPv4): netmodel.ValueFalse})
	setAvailable(t, "nl-u4", "1")
	waitLabels(t, "nl-b", map[string]string{netmodel.AvailableKey("nl-u", family.IPv4): netmodel.ValueTrue})

	// A second family.IPv6 subnet flips ipv6 to true; the network going away takes
	// its labels with it.
	newSubnet(t, "nl-u6", "nl-u", "fd81::/64", 6)
	waitLabels(t, "nl-b", map[string]string{netmodel.AvailableKey("nl-u", family.IPv6): netmodel.ValueTrue})
	if err := k8s.Delete(bg(), &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "nl-u"}}); err != nil {
		t.Fatal(err)
	}
	waitLabels(t, "nl-b", ov, uKeys...)
	waitLabels(t, "nl-a", map[string]string{"team": "x", netmodel.Prefix + "zone": "keep"}, uKeys...)
}

func TestNoPatchWhenNothingChanges(t *testing.T) {
	startManager(t)
	newNode(t, "nl-quiet", nil)
	newNetwork(t, "nl-quiet-ov", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay})
	newSubnet(t, "nl-quiet-4", "nl-quiet-ov", "10.82.0.0/24", 4)
	setAvailable(t, "nl-quiet-4", "10")
	waitLabels(t, "nl-quiet", map[string]string{netmodel.AvailableKey("nl-quiet-ov", family.IPv4): netmodel.ValueTrue})
	time.Sleep(500 * time.Millisecond)
	_, before, err := nodeLabels("nl-quiet")
	if err != nil {
		t.Fatal(err)
	}
	// Subnet events that leave every label as it is write nothing.
	setAvailable(t, "nl-quiet-4", "9")
	setAvailable(t, "nl-quiet-4", "8")
	time.Sleep(time.Second)
	if _, after, err := nodeLabels("nl-quiet"); err != nil || after != before {
		t.Errorf("node written without a label change: resourceVersion %s -> %s (%v)", before, after, err)
	}
}

func TestLongNetworkNameGetsAHashedKey(t *testing.T) {
	startManager(t)
	name := "nl-" + strings.Repeat("long", 14)
	newNode(t, "nl-long", nil)
	newNetwork(t, name, estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay})
	k := netmodel.AvailableKey(name, family.IPv4)
	if strings.Contains(k, name) {
		t.Fatalf("key %q keeps the whole %d-character name", k, len(name))
	}
	waitLabels(t, "nl-long", map[string]string{netmodel.NetworkKey(name): netmodel.ValueAttached, k: netmodel.ValueFalse})
}

func setSelector(t *testing.T, network string, sel map[string]string) {
	t.Helper()
	n := &estuaryv1.Network{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: network}, n); err != nil {
		t.Fatal(err)
	}
	n.Spec.NodeSelector = sel
	if err := k8s.Update(bg(), n); err != nil {
		t.Fatal(err)
	}
}

func relabel(t *testing.T, node, key, value string) {
	t.Helper()
	n := &corev1.Node{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Labels[key] = value
	if err := k8s.Patch(bg(), n, patch); err != nil {
		t.Fatal(err)
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
