package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/netmodel"
)

// hybridnetFixture: an Overlay network hn-ov and a dual-stack VLAN network
// hn-u over rack r7, with one subnet of each family.
func hybridnetFixture() []client.Object {
	return []client.Object{
		overlayNet("hn-ov"), underlayNet("hn-u", vlan, sel("rack", "r7")),
		subnetObj("hn-ov4", "hn-ov", "10.86.0.0/24"),
		subnetObj("hn-u4", "hn-u", "10.86.1.0/24", gw("10.86.1.1")), subnetObj("hn-u6", "hn-u", "fd00:86:1::/64", gw("fd00:86:1::1")),
	}
}

func labelled(lbls map[string]string) podOpt {
	return func(p *corev1.Pod) { p.Labels = lbls }
}

// A pod written for hybridnet (its annotations or labels, its syntax) is
// admitted and mutated exactly as the same pod written with estuary's
// annotations: the same node affinity, also when the keys come from the
// namespace.
func TestHybridnetKeysMutateAsEstuarys(t *testing.T) {
	seed(t, append(hybridnetFixture(),
		nsObj("hn-ns", sel(netmodel.HybridnetNetwork, "hn-u", netmodel.HybridnetIPFamily, "ipv6only")),
		nsObj("hn-ns-estuary", sel(annNet, "hn-u", annFam, "IPv6")))...)
	cases := []struct {
		name              string
		estuary, hybrid   *corev1.Pod
		wantDomainAndPool bool
	}{
		{"network by annotation",
			podObj("default", "e-net", sel(annNet, "hn-u")),
			podObj("default", "h-net", sel(netmodel.HybridnetNetwork, "hn-u")), true},
		{"network by hybridnet label",
			podObj("default", "e-net-l", sel(annNet, "hn-u")),
			podObj("default", "h-net-l", nil, labelled(sel(netmodel.HybridnetNetwork, "hn-u"))), true},
		{"network by estuary label",
			podObj("default", "e-net-el", sel(annNet, "hn-u")),
			podObj("default", "h-net-el", nil, labelled(sel(annNet, "hn-u"))), true},
		{"v4/v6 subnets",
			podObj("default", "e-sub", sel(annSub, "hn-u4,hn-u6")),
			podObj("default", "h-sub", sel(netmodel.HybridnetSubnet, "hn-u4/hn-u6")), true},
		{"type and family in hybridnet's spelling",
			podObj("default", "e-fam", sel(annNet, "hn-u", annType, "Underlay", annFam, "IPv6")),
			podObj("default", "h-fam", sel(netmodel.HybridnetNetwork, "hn-u", netmodel.HybridnetNetworkType, "underlay",
				netmodel.HybridnetIPFamily, "IPv6Only")), true},
		{"namespace's hybridnet keys",
			podObj("hn-ns-estuary", "e-ns", nil),
			podObj("hn-ns", "h-ns", nil), true},
		{"overlay by type in lower case",
			podObj("default", "e-ov", sel(annType, "Overlay")),
			podObj("default", "h-ov", sel(netmodel.HybridnetNetworkType, "overlay")), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			create(t, c.estuary, c.hybrid)
			e, h := &corev1.Pod{}, &corev1.Pod{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(c.estuary), e); err != nil {
				t.Fatal(err)
			}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(c.hybrid), h); err != nil {
				t.Fatal(err)
			}
			if e.Spec.Affinity == nil {
				t.Fatal("the estuary-annotated pod got no affinity")
			}
			if !equality.Semantic.DeepEqual(e.Spec.Affinity, h.Spec.Affinity) {
				t.Errorf("hybridnet pod's affinity\n%s\nestuary pod's\n%s", affinityString(h.Spec.Affinity), affinityString(e.Spec.Affinity))
			}
			hasDomain := false
			for _, r := range h.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions {
				hasDomain = hasDomain || equality.Semantic.DeepEqual(r, in("rack", "r7"))
			}
			if hasDomain != c.wantDomainAndPool {
				t.Errorf("hn-u's domain in the affinity: %v, want %v", hasDomain, c.wantDomainAndPool)
			}
		})
	}
}

// Denials of hybridnet keys name the key written (annotation or label, on
// the pod or inherited), and a pod whose estuary and hybridnet keys
// disagree is refused naming both.
func TestHybridnetKeyDenials(t *testing.T) {
	seed(t, append(hybridnetFixture(), nsObj("hn-deny", sel(netmodel.HybridnetSubnet, "nope")))...)
	pod := func(a map[string]string, opts ...podOpt) client.Object { return podObj("default", "p", a, opts...) }
	label := func(k string) string { return "metadata.labels[" + k + "]" }
	runDenials(t, []denial{
		{name: "missing network (annotation)", create: pod(sel(netmodel.HybridnetNetwork, "nope")),
			want: []string{`pod "default/p"`, ann(netmodel.HybridnetNetwork), `network "nope"`, "does not exist"}},
		{name: "missing network (label)", create: pod(nil, labelled(sel(netmodel.HybridnetNetwork, "nope"))),
			want: []string{`pod "default/p"`, label(netmodel.HybridnetNetwork), `network "nope"`, "does not exist"}},
		{name: "missing subnet (namespace)", create: podObj("hn-deny", "p", nil),
			want: []string{`pod "hn-deny/p"`, ann(netmodel.HybridnetSubnet) + ` (inherited from namespace "hn-deny")`, `subnet "nope"`}},
		{name: "three subnets", create: pod(sel(netmodel.HybridnetSubnet, "hn-u4/hn-u6/hn-ov4")),
			want: []string{ann(netmodel.HybridnetSubnet), "names 3 subnets", "v4name/v6name"}},
		{name: "type against the named network", create: pod(sel(netmodel.HybridnetNetwork, "hn-ov", netmodel.HybridnetNetworkType, "UNDERLAY")),
			want: []string{ann(netmodel.HybridnetNetworkType), `network "hn-ov"`, "spec.type is Overlay"}},
		{name: "unknown family", create: pod(sel(netmodel.HybridnetIPFamily, "IPv5")),
			want: []string{ann(netmodel.HybridnetIPFamily), `"IPv5" is not IPv4Only, IPv6Only, DualStack`}},
		{name: "estuary and hybridnet networks differ", create: pod(sel(annNet, "hn-u", netmodel.HybridnetNetwork, "hn-ov")),
			want: []string{ann(annNet) + ` is "hn-u"`, ann(netmodel.HybridnetNetwork) + ` on the same object is "hn-ov"`}},
		{name: "unparsable ip-retain", create: pod(sel(netmodel.HybridnetIPRetain, "yes")),
			want: []string{ann(netmodel.HybridnetIPRetain), `"yes" is not a boolean`}},
		{name: "ip-pool address outside the network", create: pod(sel(netmodel.HybridnetNetwork, "hn-u", netmodel.HybridnetIPPool, "10.86.0.9")),
			want: []string{ann(netmodel.HybridnetIPPool), "10.86.0.9", `network "hn-u"`}},
	})
}
