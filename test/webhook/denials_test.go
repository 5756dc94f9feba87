package webhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// denial is a write that must be refused: the create of create, an update
// of seed[target] by mutate, or (remove) the delete of seed[target], after
// seed has been created in order. want is what the message must say: the
// object, the field and any other object involved. schema marks a rule the
// CRD schema enforces before the webhook is asked; every other denial must
// come from the webhook.
type denial struct {
	name   string
	schema bool
	seed   []client.Object
	create client.Object
	target int
	mutate func(client.Object)
	remove bool
	want   []string
}

func ann(field string) string { return "metadata.annotations[" + field + "]" }

func TestDenialCount(t *testing.T) {
	n := len(networkDenials()) + len(subnetDenials()) + len(podDenials()) + len(podDenialsWithoutOverlay())
	if n < 40 {
		t.Errorf("%d denial cases, want at least 40", n)
	}
}

func TestNetworkDenials(t *testing.T) { runDenials(t, networkDenials()) }

func TestSubnetDenials(t *testing.T) { runDenials(t, subnetDenials()) }

func runDenials(t *testing.T, cases []denial) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}

func (c *denial) run(t *testing.T) {
	seed(t, c.seed...)
	want := c.want
	if !c.schema {
		want = append([]string{`admission webhook "`, "denied the request"}, want...)
	}
	switch {
	case c.create != nil:
		requireDenied(t, k8s.Create(ctx(t), c.create), want...)
		requireAbsent(t, c.create)
	case c.mutate != nil:
		obj := c.seed[c.target]
		before := obj.DeepCopyObject().(client.Object)
		c.mutate(obj)
		requireDenied(t, k8s.Update(ctx(t), obj), want...)
		requireUnchanged(t, before)
	case c.remove:
		obj := c.seed[c.target]
		requireDenied(t, k8s.Delete(ctx(t), obj), want...)
		requireUnchanged(t, obj)
	default:
		t.Fatal("case has no refused write")
	}
}

// requireAbsent asserts a refused create stored nothing.
func requireAbsent(t *testing.T, obj client.Object) {
	t.Helper()
	if obj.GetName() == "" {
		var pods corev1.PodList
		if err := k8s.List(ctx(t), &pods, client.InNamespace(obj.GetNamespace())); err != nil {
			t.Fatalf("list pods: %v", err)
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, obj.GetGenerateName()) {
				t.Errorf("refused pod was stored as %s", p.Name)
			}
		}
		return
	}
	probe := obj.DeepCopyObject().(client.Object)
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(obj), probe); !apierrors.IsNotFound(err) {
		t.Errorf("refused %T %s: get returned %v, want NotFound", obj, obj.GetName(), err)
	}
}

// requireUnchanged asserts the stored object is still at before's version.
func requireUnchanged(t *testing.T, before client.Object) {
	t.Helper()
	probe := before.DeepCopyObject().(client.Object)
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(before), probe); err != nil {
		t.Fatalf("refused write lost %T %s: %v", before, before.GetName(), err)
	}
	if probe.GetResourceVersion() != before.GetResourceVersion() || probe.GetDeletionTimestamp() != nil {
		t.Errorf("refused write changed %T %s (resourceVersion %s -> %s, deletion %v)", before, before.GetName(),
			before.GetResourceVersion(), probe.GetResourceVersion(), probe.GetDeletionTimestamp())
	}
}

func setSelector(s map[string]string) func(client.Object) {
	return func(o client.Object) { o.(*estuaryv1.Network).Spec.NodeSelector = s }
}

func networkDenials() []denial {
	return []denial{
		{name: "second overlay network",
			seed: []client.Object{overlayNet("ov1")}, create: overlayNet("ov2"),
			want: []string{`network "ov2"`, "spec.type", `network "ov1"`}},
		{name: "identical underlay selectors without nodes",
			seed:   []client.Object{underlayNet("u1", vlan, sel("rack", "r1"))},
			create: underlayNet("u2", vlan, sel("rack", "r1")),
			want:   []string{`network "u2"`, "spec.nodeSelector {rack=r1}", `network "u1"`}},
		{name: "identical selectors of a VLAN and a BGP network",
			seed:   []client.Object{underlayNet("u1", bgp, sel("bgp", "on"))},
			create: underlayNet("u2", vlan, sel("bgp", "on")),
			want:   []string{`network "u2"`, "spec.nodeSelector", `network "u1"`}},
		{name: "different selectors sharing a node",
			seed:   []client.Object{nodeObj("n1", sel("rack", "r1", "zone", "z1")), underlayNet("u1", vlan, sel("rack", "r1"))},
			create: underlayNet("u2", bgp, sel("zone", "z1")),
			want:   []string{`network "u2"`, "spec.nodeSelector {zone=z1}", `node "n1"`, `network "u1" (nodeSelector {rack=r1})`}},
		{name: "narrower selector inside another domain",
			seed:   []client.Object{nodeObj("n1", sel("rack", "r1", "tier", "a")), underlayNet("u1", vlan, sel("rack", "r1"))},
			create: underlayNet("u2", vlan, sel("rack", "r1", "tier", "a")),
			want:   []string{`network "u2"`, "spec.nodeSelector", `node "n1"`, `network "u1"`}},
		{name: "conflict with the second of two domains",
			seed: []client.Object{nodeObj("n1", sel("rack", "r1")), nodeObj("n2", sel("rack", "r2", "row", "x")),
				underlayNet("u1", vlan, sel("rack", "r1")), underlayNet("u2", vlan, sel("rack", "r2"))},
			create: underlayNet("u3", vlan, sel("row", "x")),
			want:   []string{`network "u3"`, "spec.nodeSelector", `node "n2"`, `network "u2"`}},
		{name: "BGP network without peers (schema)", schema: true,
			create: func() client.Object { n := underlayNet("b1", bgp, sel("bgp", "on")); n.Spec.BGPPeers = nil; return n }(),
			want:   []string{`"b1"`, "spec.bgpPeers", "at least one peer"}},
		{name: "update to an identical selector",
			seed:   []client.Object{underlayNet("u1", vlan, sel("rack", "r1")), underlayNet("u2", vlan, sel("rack", "r2"))},
			target: 1, mutate: setSelector(sel("rack", "r1")),
			want: []string{`network "u2"`, "spec.nodeSelector {rack=r1}", `network "u1"`}},
		{name: "update to a selector sharing a node",
			seed: []client.Object{nodeObj("n1", sel("rack", "r1", "zone", "z1")),
				underlayNet("u1", vlan, sel("rack", "r1")), underlayNet("u2", vlan, sel("rack", "r2"))},
			target: 2, mutate: setSelector(sel("zone", "z1")),
			want: []string{`network "u2"`, "spec.nodeSelector {zone=z1}", `node "n1"`, `network "u1"`}},
		{name: "update adding a label that reaches another domain's node",
			seed: []client.Object{nodeObj("n1", sel("rack", "r1", "tier", "a")),
				underlayNet("u1", vlan, sel("rack", "r1")), underlayNet("u2", vlan, sel("tier", "b"))},
			target: 2, mutate: setSelector(sel("tier", "a")),
			want: []string{`network "u2"`, "spec.nodeSelector {tier=a}", `node "n1"`, `network "u1"`}},
		{name: "delete an overlay network with a subnet",
			seed:   []client.Object{overlayNet("ov"), subnetObj("s1", "ov", "10.0.0.0/24")},
			target: 0, remove: true,
			want: []string{`network "ov"`, `subnet "s1"`, `spec.network "ov"`}},
		{name: "delete an underlay network with two subnets",
			seed: []client.Object{underlayNet("u1", vlan, sel("rack", "r1")),
				subnetObj("s-b", "u1", "10.1.0.0/24", gw("10.1.0.1")), subnetObj("s-a", "u1", "10.2.0.0/24", gw("10.2.0.1"))},
			target: 0, remove: true,
			want: []string{`network "u1"`, `subnet "s-a"`, "spec.network", "1 more"}},
	}
}

func subnetDenials() []denial {
	ovAndVLAN := func(extra ...client.Object) []client.Object {
		return append([]client.Object{overlayNet("ov"), underlayNet("u1", vlan, sel("rack", "r1"))}, extra...)
	}
	return []denial{
		{name: "missing network",
			create: subnetObj("s1", "nope", "10.0.0.0/24"),
			want:   []string{`subnet "s1"`, `spec.network "nope"`, `network "nope" does not exist`}},
		{name: "inside a subnet of another network",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.0.0/16")),
			create: subnetObj("b", "u1", "10.0.0.0/24", gw("10.0.0.1")),
			want:   []string{`subnet "b": spec.range.cidr 10.0.0.0/24 overlaps subnet "a" (10.0.0.0/16)`, `network "ov"`}},
		{name: "around a subnet of the same network",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.5.0/24")),
			create: subnetObj("b", "ov", "10.0.0.0/16"),
			want:   []string{`subnet "b": spec.range.cidr 10.0.0.0/16 overlaps subnet "a" (10.0.5.0/24)`}},
		{name: "half of a subnet of the same network",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.0.0/24")),
			create: subnetObj("b", "ov", "10.0.0.0/25", span("10.0.0.100", "10.0.0.120")),
			want:   []string{`subnet "b"`, "spec.range.cidr", `subnet "a" (10.0.0.0/24)`, "identical cidr"}},
		{name: "same CIDR in another network",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.0.0/24", span("10.0.0.2", "10.0.0.9"))),
			create: subnetObj("b", "u1", "10.0.0.0/24", span("10.0.0.10", "10.0.0.20"), gw("10.0.0.254")),
			want:   []string{`subnet "b"`, "spec.range.cidr 10.0.0.0/24", `subnet "a"`, `network "ov"`}},
		{name: "same CIDR, overlapping ranges",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.0.0/24", span("10.0.0.2", "10.0.0.99"))),
			create: subnetObj("b", "ov", "10.0.0.0/24", span("10.0.0.50", "10.0.0.200")),
			want:   []string{`subnet "b"`, "spec.range start-end 10.0.0.50-10.0.0.200", `subnet "a"'s range 10.0.0.2-10.0.0.99`}},
		{name: "same CIDR, both with default ranges",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.0.0/24")),
			create: subnetObj("b", "ov", "10.0.0.0/24"),
			want:   []string{`subnet "b"`, "spec.range", `subnet "a"'s range 10.0.0.1-10.0.0.254`}},
		{name: "same CIDR, explicit range inside a default one",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.0.0/24")),
			create: subnetObj("b", "ov", "10.0.0.0/24", span("10.0.0.200", "10.0.0.210")),
			want:   []string{`subnet "b"`, "spec.range start-end 10.0.0.200-10.0.0.210", `subnet "a"`}},
		{name: "same CIDR, ranges sharing one address",
			seed:   ovAndVLAN(subnetObj("a", "ov", "10.0.0.0/24", span("10.0.0.2", "10.0.0.99"))),
			create: subnetObj("b", "ov", "10.0.0.0/24", span("10.0.0.99", "10.0.0.200")),
			want:   []string{`subnet "b"`, "spec.range", `subnet "a"`}},
		{name: "same CIDR, range holding the other's gateway",
			seed:   ovAndVLAN(subnetObj("a", "u1", "10.0.0.0/24", span("10.0.0.2", "10.0.0.99"), gw("10.0.0.150"))),
			create: subnetObj("b", "u1", "10.0.0.0/24", span("10.0.0.100", "10.0.0.200"), gw("10.0.0.254")),
			want:   []string{`subnet "b"`, "spec.range start-end 10.0.0.100-10.0.0.200", `subnet "a"'s gateway 10.0.0.150`}},
		{name: "same CIDR, gateway inside the other's range",
			seed:   ovAndVLAN(subnetObj("a", "u1", "10.0.0.0/24", span("10.0.0.2", "10.0.0.99"), gw("10.0.0.254"))),
			create: subnetObj("b", "u1", "10.0.0.0/24", span("10.0.0.100", "10.0.0.200"), gw("10.0.0.50")),
			want:   []string{`subnet "b"`, "spec.range.gateway 10.0.0.50", `subnet "a"'s range 10.0.0.2-10.0.0.99`}},
		{name: "IPv6 inside a subnet of another network",
			seed:   ovAndVLAN(subnetObj("a", "ov", "fd00::/64")),
			create: subnetObj("b", "u1", "fd00::/96", gw("fd00::1")),
			want:   []string{`subnet "b": spec.range.cidr fd00::/96 overlaps subnet "a" (fd00::/64)`}},
		{name: "IPv6 same CIDR, overlapping ranges",
			seed:   ovAndVLAN(subnetObj("a", "ov", "fd00:1::/64", span("fd00:1::10", "fd00:1::20"))),
			create: subnetObj("b", "ov", "fd00:1::/64", span("fd00:1::20", "fd00:1::30")),
			want:   []string{`subnet "b"`, "spec.range start-end fd00:1::20-fd00:1::30", `subnet "a"`}},
		{name: "overlapping two subnets",
			seed:   ovAndVLAN(subnetObj("a1", "ov", "10.0.1.0/24"), subnetObj("a2", "ov", "10.0.2.0/24")),
			create: subnetObj("b", "ov", "10.0.0.0/16"),
			want:   []string{`subnet "b"`, "spec.range.cidr", `subnet "a1"`, `subnet "a2"`}},
		{name: "VLAN subnet without gateway",
			seed:   ovAndVLAN(),
			create: subnetObj("s1", "u1", "10.1.0.0/24"),
			want:   []string{`subnet "s1"`, "spec.range.gateway is required", `network "u1"`, "mode VLAN"}},
		{name: "IPv6 subnet of an explicit VLAN network without gateway",
			seed:   []client.Object{underlayNet("u2", vlan, sel("rack", "r2"))},
			create: subnetObj("s1", "u2", "fd00:2::/64"),
			want:   []string{`subnet "s1"`, "spec.range.gateway", `network "u2"`}},
		{name: "VLAN id on an overlay subnet",
			seed:   ovAndVLAN(),
			create: subnetObj("s1", "ov", "10.1.0.0/24", vlanID(7)),
			want:   []string{`subnet "s1"`, "spec.netID 7", `network "ov"`, "VXLAN"}},
		{name: "VLAN id on a BGP subnet",
			seed:   []client.Object{underlayNet("b1", bgp, sel("bgp", "on"))},
			create: subnetObj("s1", "b1", "10.1.0.0/24", vlanID(7)),
			want:   []string{`subnet "s1"`, "spec.netID 7", `network "b1"`, "BGP"}},
		{name: "version not matching the CIDR (schema)", schema: true,
			seed:   ovAndVLAN(),
			create: subnetObj("s1", "ov", "10.1.0.0/24", version(6)),
			want:   []string{`"s1"`, "spec.range.version"}},
		{name: "delete a subnet with a bound address",
			seed: ovAndVLAN(subnetObj("s1", "ov", "10.1.0.0/24"),
				instance("default", "i1", "ov", "s1", "10.1.0.7/24")),
			target: 2, remove: true,
			want: []string{`subnet "s1"`, `ipinstance "10.1.0.7" (pod default/i1`, `spec.subnet "s1"`}},
		{name: "delete a subnet with an address in another namespace",
			seed: ovAndVLAN(subnetObj("s1", "ov", "10.1.0.0/24"),
				instance("kube-public", "i2", "ov", "s1", "10.1.0.8/24")),
			target: 2, remove: true,
			want: []string{`subnet "s1"`, `ipinstance "10.1.0.8" (pod kube-public/i2`, "spec.subnet"}},
	}
}
