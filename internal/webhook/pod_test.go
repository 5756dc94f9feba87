package webhook

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

const (
	annNet  = estuaryv1.AnnotationNetwork
	annSub  = estuaryv1.AnnotationSubnet
	annType = estuaryv1.AnnotationNetworkType
	annFam  = estuaryv1.AnnotationIPFamily
)

func pod(ann map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: ann}}
}

func namespace(ann map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: ann}}
}

func TestValidatePod(t *testing.T) {
	networks := []estuaryv1.Network{overlay("o"), underlay("u", estuaryv1.NetworkModeVLAN, map[string]string{"rack": "r1"})}
	subnets := []estuaryv1.Subnet{subnet("o4", "o", "10.0.0.0/16"), subnet("o6", "o", "fd00::/64"),
		subnet("o4b", "o", "10.1.0.0/16"), subnet("u4", "u", "10.2.0.0/24,,,10.2.0.1")}
	field := func(key string) string { return "metadata.annotations[" + key + "]" }
	cases := []struct {
		name    string
		pod, ns map[string]string
		want    []string
	}{
		{"no annotations", nil, nil, nil},
		{"overlay by name", map[string]string{annNet: "o"}, nil, nil},
		{"dual-stack subnets", map[string]string{annSub: "o4, o6", annFam: "DualStack"}, nil, nil},
		{"underlay by type and name", map[string]string{annNet: "u", annType: "Underlay"}, nil, nil},
		{"overlay by type", map[string]string{annType: "Overlay"}, nil, nil},
		{"inherited network", nil, map[string]string{annNet: "u"}, nil},
		{"pod's empty value wins over namespace's", map[string]string{annNet: ""}, map[string]string{annNet: "nope"}, nil},
		{"missing network", map[string]string{annNet: "nope"}, nil, []string{`pod "ns/p"`, field(annNet), `network "nope"`}},
		{"missing subnet", map[string]string{annSub: "nope"}, nil, []string{`pod "ns/p"`, field(annSub), `subnet "nope"`}},
		{"subnet of another network", map[string]string{annNet: "u", annSub: "o4"}, nil,
			[]string{field(annSub), `subnet "o4"`, `spec.network is "o"`, `"u"`}},
		{"subnets of two networks", map[string]string{annSub: "o4,u4"}, nil, []string{field(annSub), `subnet "o4"`, `subnet "u4"`}},
		{"two subnets of one family", map[string]string{annSub: "o4b,o4"}, nil, nil},
		{"two IPv4 subnets and an IPv6 one", map[string]string{annSub: "o4,o6,o4b", annFam: "DualStack"}, nil, nil},
		{"two subnets of one family, one of another network", map[string]string{annSub: "o4,o4b,u4"}, nil,
			[]string{field(annSub), `subnet "o4"`, `subnet "u4"`, "spec.network differ"}},
		{"seventeen subnets", map[string]string{annSub: "o4,o4b,o6,a,b,c,d,e,f,g,h,i,j,k,l,m,n"}, nil,
			[]string{field(annSub), "17 subnets", "at most 16"}},
		{"same subnet twice", map[string]string{annSub: "o4,o4"}, nil, []string{field(annSub), "twice"}},
		{"bad subnet name", map[string]string{annSub: "o4,"}, nil, []string{field(annSub), `"" is not a valid subnet name`}},
		{"bad network name", map[string]string{annNet: "Bad_Name"}, nil, []string{field(annNet), `"Bad_Name"`}},
		{"type mismatch", map[string]string{annNet: "o", annType: "Underlay"}, nil,
			[]string{field(annType), `network "o"`, "spec.type is Overlay"}},
		{"type mismatch via subnet", map[string]string{annSub: "u4", annType: "Overlay"}, nil,
			[]string{field(annType), `network "u"`, "spec.type is Underlay"}},
		{"underlay by type", map[string]string{annType: "Underlay"}, nil, nil},
		{"underlay by type, no IPv6 underlay", map[string]string{annType: "Underlay", annFam: "IPv6"}, nil,
			[]string{field(annType), "is Underlay and no network or subnet is named", "no Underlay network", "[IPv6]"}},
		{"unknown type", map[string]string{annType: "overlay"}, nil, []string{field(annType), `"overlay"`}},
		{"unknown family", map[string]string{annFam: "IPv5"}, nil, []string{field(annFam), `"IPv5"`}},
		{"inherited missing network", nil, map[string]string{annNet: "nope"},
			[]string{field(annNet) + ` (inherited from namespace "ns")`, `network "nope"`}},
		{"inherited type against pod's network", map[string]string{annNet: "o"}, map[string]string{annType: "Underlay"},
			[]string{field(annType) + ` (inherited from namespace "ns")`, `network "o"`}},
		{"pod subnet against inherited network", map[string]string{annSub: "o4"}, map[string]string{annNet: "u"},
			[]string{field(annSub), `subnet "o4"`, `"u"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := netmodel.ValidatePod(pod(c.pod), namespace(c.ns), networks, subnets)
			if c.want == nil {
				requireAdmitted(t, err)
				return
			}
			requireDenied(t, err, c.want...)
		})
	}
}

// A network that names its namespaces refuses pods of every other one,
// whichever annotation (or default) selected it.
func TestValidatePodNetworkNamespaces(t *testing.T) {
	o, u := overlay("o"), underlay("u", estuaryv1.NetworkModeVLAN, map[string]string{"rack": "r1"})
	u.Spec.Namespaces = []string{"team-a", "team-b"}
	o.Spec.Namespaces = []string{"team-a"}
	networks := []estuaryv1.Network{o, u}
	subnets := []estuaryv1.Subnet{subnet("o4", "o", "10.0.0.0/16"), subnet("u4", "u", "10.2.0.0/24,,,10.2.0.1")}
	inNS := func(ns string, ann map[string]string) *corev1.Pod {
		p := pod(ann)
		p.Namespace = ns
		return p
	}
	requireAdmitted(t, netmodel.ValidatePod(inNS("team-b", map[string]string{annNet: "u"}), nil, networks, subnets))
	requireAdmitted(t, netmodel.ValidatePod(inNS("team-a", nil), nil, networks, subnets))
	requireDenied(t, netmodel.ValidatePod(inNS("ns", map[string]string{annNet: "u"}), nil, networks, subnets),
		`pod "ns/p"`, "metadata.annotations["+annNet+"]", `network "u"`, "spec.namespaces [team-a team-b]", `not "ns"`)
	requireDenied(t, netmodel.ValidatePod(inNS("ns", map[string]string{annSub: "u4"}), nil, networks, subnets),
		"metadata.annotations["+annSub+"]", `network "u"`)
	requireDenied(t, netmodel.ValidatePod(inNS("team-b", nil), nil, networks, subnets),
		"metadata.namespace", "default network", `network "o"`, `not "team-b"`)
}

func TestValidatePodWithoutOverlay(t *testing.T) {
	networks := []estuaryv1.Network{underlay("u", estuaryv1.NetworkModeVLAN, map[string]string{"rack": "r1"})}
	requireAdmitted(t, netmodel.ValidatePod(pod(nil), nil, networks, nil))
	requireDenied(t, netmodel.ValidatePod(pod(map[string]string{annType: "Overlay"}), nil, networks, nil),
		"metadata.annotations["+annType+"]", "no Overlay network")
	requireDenied(t, netmodel.ValidatePod(pod(map[string]string{annFam: "IPv4"}), nil, networks, nil),
		"metadata.annotations["+annNet+"]", "no Overlay network")
	host := pod(map[string]string{annNet: "nope"})
	host.Spec.HostNetwork = true
	requireAdmitted(t, netmodel.ValidatePod(host, nil, networks, nil))
}

func TestResolveNetwork(t *testing.T) {
	networks := []estuaryv1.Network{underlay("u", estuaryv1.NetworkModeVLAN, map[string]string{"rack": "r1"}), overlay("o")}
	subnets := []estuaryv1.Subnet{subnet("u4", "u", "10.2.0.0/24,,,10.2.0.1")}
	for _, c := range []struct {
		ann  map[string]string
		want string
	}{
		{nil, "o"},
		{map[string]string{annNet: "u"}, "u"},
		{map[string]string{annSub: "u4"}, "u"},
		{map[string]string{annFam: "IPv4"}, "o"},
	} {
		sel, err := netmodel.SelectionFor(pod(c.ann), nil)
		requireAdmitted(t, err)
		n, err := netmodel.ResolveNetwork(&sel, networks, subnets)
		requireAdmitted(t, err)
		if n == nil || n.Name != c.want {
			t.Errorf("%v: resolved %v, want network %q", c.ann, n, c.want)
		}
	}
}

func TestAddDomainAffinity(t *testing.T) {
	sel := map[string]string{"rack": "r1", "estuary/vlan": "on"}
	want := []corev1.NodeSelectorRequirement{
		{Key: "estuary/vlan", Operator: corev1.NodeSelectorOpIn, Values: []string{"on"}},
		{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}},
	}
	own := corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpExists}
	field := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}

	p := pod(nil)
	if !AddDomainAffinity(p, sel) {
		t.Fatal("a pod without affinity was not changed")
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || !equality.Semantic.DeepEqual(terms[0].MatchExpressions, want) {
		t.Fatalf("terms = %+v, want one term %+v", terms, want)
	}

	p = pod(nil)
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{own}},
			{MatchFields: []corev1.NodeSelectorRequirement{field}},
		}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
	}}
	if !AddDomainAffinity(p, sel) {
		t.Fatal("a pod with its own terms was not changed")
	}
	na := p.Spec.Affinity.NodeAffinity
	terms = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 {
		t.Fatalf("terms = %+v, want the pod's two", terms)
	}
	if !equality.Semantic.DeepEqual(terms[0].MatchExpressions, append([]corev1.NodeSelectorRequirement{own}, want...)) {
		t.Errorf("first term = %+v, want the pod's requirement and the domain's", terms[0].MatchExpressions)
	}
	if !equality.Semantic.DeepEqual(terms[1].MatchExpressions, want) || len(terms[1].MatchFields) != 1 {
		t.Errorf("second term = %+v, want its field requirement and the domain's", terms[1])
	}
	if len(na.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Error("preferred terms were changed")
	}
	before := p.DeepCopy()
	if AddDomainAffinity(p, sel) || !equality.Semantic.DeepEqual(before, p) {
		t.Error("a second pass changed the pod")
	}
	if AddDomainAffinity(p, nil) {
		t.Error("an empty selector changed the pod")
	}
}

func TestDomainSelector(t *testing.T) {
	o, u := overlay("o"), underlay("u", estuaryv1.NetworkModeBGP, map[string]string{"a": "b"})
	if netmodel.DomainSelector(nil) != nil || netmodel.DomainSelector(&o) != nil {
		t.Error("an overlay or missing network has a domain selector")
	}
	if netmodel.DomainSelector(&u)["a"] != "b" {
		t.Error("an underlay network's selector was not returned")
	}
}

func TestConfigurations(t *testing.T) {
	v, m := Configurations(Service{Namespace: "estuary-system", Name: "estuary-webhook", Port: 443})
	paths := map[string]bool{}
	for _, w := range v.Webhooks {
		paths[*w.ClientConfig.Service.Path] = true
	}
	for _, w := range m.Webhooks {
		paths[*w.ClientConfig.Service.Path] = true
	}
	for _, p := range []string{PathValidateNetwork, PathValidateSubnet, PathValidatePod, PathMutatePod} {
		if !paths[p] {
			t.Errorf("no webhook serves %s", p)
		}
	}
	if v.Name != ConfigurationName || m.Name != ConfigurationName {
		t.Errorf("configurations named %q and %q, want %q", v.Name, m.Name, ConfigurationName)
	}
	for _, sel := range []*metav1.LabelSelector{v.Webhooks[2].NamespaceSelector, m.Webhooks[0].NamespaceSelector} {
		if sel == nil || len(sel.MatchExpressions) != 1 || !slices.Contains(sel.MatchExpressions[0].Values, "estuary-system") {
			t.Errorf("pod webhook namespace selector %v does not skip the webhook's namespace", sel)
		}
	}
}
