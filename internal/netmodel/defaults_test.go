package netmodel

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

func TestParseDefaults(t *testing.T) {
	if v, err := ParseNetworkType("underlay"); err != nil || v != estuaryv1.NetworkTypeUnderlay {
		t.Errorf("ParseNetworkType(underlay) = %q, %v", v, err)
	}
	if _, err := ParseNetworkType("Vxlan"); err == nil || !strings.Contains(err.Error(), `"Vxlan" is not Overlay or Underlay`) {
		t.Errorf("ParseNetworkType(Vxlan) = %v, want a refusal naming the value", err)
	}
	if v, err := ParseIPFamily("dualstack"); err != nil || v != estuaryv1.IPFamilyDualStack {
		t.Errorf("ParseIPFamily(dualstack) = %q, %v", v, err)
	}
	if v, err := ParseIPFamily("network"); err != nil || v != IPFamilyNetwork {
		t.Errorf("ParseIPFamily(network) = %q, %v", v, err)
	}
	if _, err := ParseIPFamily("IPv4Only"); err == nil || !strings.Contains(err.Error(), "Network") {
		t.Errorf("ParseIPFamily(IPv4Only) = %v, want a refusal listing the values", err)
	}
}

func underlayNet(name string, nodeSel map[string]string, namespaces ...string) estuaryv1.Network {
	n := network(name, estuaryv1.NetworkTypeUnderlay, 0)
	n.Spec.NodeSelector, n.Spec.Namespaces = nodeSel, namespaces
	return n
}

// selectionOf reads pod annotations ann (namespace ns annotations nsAnn)
// with defaults d.
func selectionOf(t *testing.T, ann, nsAnn map[string]string, d Defaults) Selection {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: nsAnn}}
	sel, err := SelectionFor(annotatedPod(ann), ns)
	if err != nil {
		t.Fatal(err)
	}
	d.Apply(&sel)
	return sel
}

// The default type applies only where the pod and its namespace name no
// network, subnet or type; Underlay by type is the result.
func TestDefaultNetworkTypePrecedence(t *testing.T) {
	under := Defaults{NetworkType: estuaryv1.NetworkTypeUnderlay}
	cases := []struct {
		name       string
		ann, nsAnn map[string]string
		d          Defaults
		byType     bool
	}{
		{"nothing, default Overlay", nil, nil, Defaults{}, false},
		{"nothing, default Underlay", nil, nil, under, true},
		{"pod type Underlay, default Overlay", map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"}, nil, Defaults{}, true},
		{"namespace type Underlay", nil, map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"}, Defaults{}, true},
		{"pod type Overlay wins over default Underlay", map[string]string{estuaryv1.AnnotationNetworkType: "Overlay"}, nil, under, false},
		{"named network wins", map[string]string{estuaryv1.AnnotationNetwork: "u1"}, nil, under, false},
		{"named subnet wins", map[string]string{estuaryv1.AnnotationSubnet: "u1-4"}, nil, under, false},
		{"namespace network wins over pod type", map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"}, map[string]string{estuaryv1.AnnotationNetwork: "u1"}, Defaults{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel := selectionOf(t, c.ann, c.nsAnn, c.d)
			if got := sel.ByType(); got != c.byType {
				t.Errorf("ByType = %v, want %v", got, c.byType)
			}
		})
	}
}

// The default family applies only to a pod that names no family and no
// subnet; a network without a public subnet of it is a denial naming the
// network, the family and the flag.
func TestDefaultIPFamily(t *testing.T) {
	nets := []estuaryv1.Network{network("ov", estuaryv1.NetworkTypeOverlay, 4)}
	dual := []estuaryv1.Subnet{subnetOf("ov4", "ov", "10.0.0.0/16"), subnetOf("ov6", "ov", "fd00::/64")}
	v6only := []estuaryv1.Subnet{subnetOf("ov6", "ov", "fd00::/64")}
	v4 := Defaults{IPFamily: estuaryv1.IPFamilyIPv4}

	sel := selectionOf(t, nil, nil, Defaults{})
	if got := FamiliesNeeded(&sel, &nets[0], dual); !slices.Equal(got, []family.Family{family.IPv4, family.IPv6}) {
		t.Errorf("default Network on a dual-stack overlay: families %v, want both", got)
	}
	sel = selectionOf(t, nil, nil, Defaults{IPFamily: IPFamilyNetwork})
	if got := sel.WantedFamilies(); got != nil {
		t.Errorf("default Network: WantedFamilies %v, want nil (the network's)", got)
	}
	sel = selectionOf(t, nil, nil, v4)
	if got := FamiliesNeeded(&sel, &nets[0], dual); !slices.Equal(got, []family.Family{family.IPv4}) {
		t.Errorf("default IPv4 on a dual-stack overlay: families %v, want IPv4 only", got)
	}
	if _, err := ResolveNetwork(&sel, nets, dual); err != nil {
		t.Errorf("default IPv4 on a dual-stack overlay: %v", err)
	}
	_, err := ResolveNetwork(&sel, nets, v6only)
	requireDenial(t, err, `pod "ns/p"`, "metadata.annotations["+estuaryv1.AnnotationIPFamily+"] is not set",
		"default IP family IPv4", FlagDefaultIPFamily, `network "ov" has no public IPv4 subnet`)

	sel = selectionOf(t, map[string]string{estuaryv1.AnnotationIPFamily: "DualStack"}, nil, v4)
	if got := FamiliesNeeded(&sel, &nets[0], dual); len(got) != 2 {
		t.Errorf("pod's DualStack under default IPv4: families %v, want both", got)
	}
	sel = selectionOf(t, map[string]string{estuaryv1.AnnotationSubnet: "ov6"}, nil, v4)
	if got := sel.WantedFamilies(); got != nil {
		t.Errorf("named subnet under default IPv4: WantedFamilies %v, want nil (the subnets say)", got)
	}
	if _, err := ResolveNetwork(&sel, nets, v6only); err != nil {
		t.Errorf("named IPv6 subnet under default IPv4: %v", err)
	}
}

// A pod asking by type may be scheduled to the Underlay networks that allow
// its namespace and have its families; it takes its node's.
func TestUnderlayByType(t *testing.T) {
	nets := []estuaryv1.Network{
		network("ov", estuaryv1.NetworkTypeOverlay, 4),
		underlayNet("u2", map[string]string{"rack": "r2"}),
		underlayNet("u1", map[string]string{"rack": "r1"}),
		underlayNet("u3", map[string]string{"rack": "r3"}, "other"),
		underlayNet("u6", map[string]string{"rack": "r6"}),
	}
	subnets := []estuaryv1.Subnet{subnetOf("u1-4", "u1", "10.1.0.0/24"), subnetOf("u2-4", "u2", "10.2.0.0/24"),
		subnetOf("u3-4", "u3", "10.3.0.0/24"), subnetOf("u6-6", "u6", "fd06::/64")}
	sel := selectionOf(t, map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"}, nil, Defaults{})
	if n, err := ResolveNetwork(&sel, nets, subnets); n != nil || err != nil {
		t.Fatalf("ResolveNetwork by type = %v, %v; want no network yet and no error", n, err)
	}
	var got []string
	for _, n := range UnderlayNetworks(&sel, nets, subnets) {
		got = append(got, n.Name)
	}
	if !slices.Equal(got, []string{"u1", "u2", "u6"}) {
		t.Errorf("candidates %v, want u1 u2 u6 (u3 does not allow ns)", got)
	}
	sel4 := selectionOf(t, map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"}, nil, Defaults{IPFamily: estuaryv1.IPFamilyIPv4})
	got = nil
	for _, n := range UnderlayNetworks(&sel4, nets, subnets) {
		got = append(got, n.Name)
	}
	if !slices.Equal(got, []string{"u1", "u2"}) {
		t.Errorf("IPv4 candidates %v, want u1 u2", got)
	}

	n, err := NodeUnderlay(&sel, "n2", map[string]string{"rack": "r2"}, nets, nil)
	if err != nil || n.Name != "u2" {
		t.Fatalf("NodeUnderlay on rack r2 = %v, %v; want u2", n, err)
	}
	sel.Bind(n, "n2")
	if got, err := ResolveNetwork(&sel, nets, subnets); err != nil || got.Name != "u2" {
		t.Errorf("ResolveNetwork after Bind = %v, %v; want u2", got, err)
	}
	if !strings.Contains(sel.field(estuaryv1.AnnotationNetwork), `spec.nodeName (u2 is the Underlay network of node "n2")`) {
		t.Errorf("field of the bound network = %q", sel.field(estuaryv1.AnnotationNetwork))
	}

	other := selectionOf(t, map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"}, nil, Defaults{})
	_, err = NodeUnderlay(&other, "n3", map[string]string{"rack": "r3"}, nets, nil)
	if err == nil || !strings.Contains(err.Error(), `node "n3" is in the domain of none it may use (u1 {rack=r1}, u2 {rack=r2}, u6 {rack=r6})`) {
		t.Errorf("NodeUnderlay on a node of a network closed to ns = %v", err)
	}
	// Should two domains hold a node, the first with room wins.
	both := map[string]string{"rack": "r1", "also": "x"}
	nets[1].Spec.NodeSelector = map[string]string{"also": "x"}
	n, err = NodeUnderlay(&other, "nb", both, nets, func(n *estuaryv1.Network) bool { return n.Name == "u2" })
	if err != nil || n.Name != "u2" {
		t.Errorf("NodeUnderlay on a node of two domains = %v, %v; want u2, the one with room", n, err)
	}
}

// A pod asking by type with nothing to take is denied naming why: the
// default type and flag when it came from there.
func TestUnderlayByTypeDenials(t *testing.T) {
	nets := []estuaryv1.Network{network("ov", estuaryv1.NetworkTypeOverlay, 4), underlayNet("u3", map[string]string{"rack": "r3"}, "other")}
	subnets := []estuaryv1.Subnet{subnetOf("ov4", "ov", "10.0.0.0/16"), subnetOf("u3-4", "u3", "10.3.0.0/24")}
	sel := selectionOf(t, nil, nil, Defaults{NetworkType: estuaryv1.NetworkTypeUnderlay, IPFamily: estuaryv1.IPFamilyIPv4})
	_, err := ResolveNetwork(&sel, nets, subnets)
	requireDenial(t, err, "metadata.annotations["+estuaryv1.AnnotationNetworkType+"] is not set",
		"default network type Underlay", FlagDefaultNetworkType, `allows namespace "ns"`, "[IPv4]", FlagDefaultIPFamily)
	sel = selectionOf(t, map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"}, nil, Defaults{})
	_, err = ResolveNetwork(&sel, nets, subnets)
	requireDenial(t, err, "metadata.annotations["+estuaryv1.AnnotationNetworkType+"] is Underlay", "has a public subnet")
}

// --default-ip-retain=false turns a StatefulSet pod's retention off unless
// ip-retain says otherwise; other pods are unchanged.
func TestDefaultIPRetain(t *testing.T) {
	for _, c := range []struct {
		name     string
		ann      map[string]string
		d        Defaults
		stateful bool
		want     bool
	}{
		{"stateful, default", nil, Defaults{}, true, true},
		{"stateful, default off", nil, Defaults{NoStatefulRetain: true}, true, false},
		{"stateful, default off, ip-retain true", map[string]string{estuaryv1.AnnotationIPRetain: "true"}, Defaults{NoStatefulRetain: true}, true, true},
		{"stateful, ip-retain false", map[string]string{estuaryv1.AnnotationIPRetain: "false"}, Defaults{}, true, false},
		{"other pod, default", nil, Defaults{}, false, false},
		{"other pod, ip-retain true, default off", map[string]string{estuaryv1.AnnotationIPRetain: "true"}, Defaults{NoStatefulRetain: true}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sel := selectionOf(t, c.ann, nil, c.d)
			fx, err := FixedFor(&sel, annotatedPod(c.ann), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := fx.retains(c.stateful); got != c.want {
				t.Errorf("retains = %v, want %v", got, c.want)
			}
		})
	}
}
