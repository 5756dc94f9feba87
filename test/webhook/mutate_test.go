package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

// notFull is the requirement the webhook adds for a family the pod takes a
// new address of from network.
func notFull(network string, f family.Family) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: netmodel.AvailableKey(network, f), Operator: corev1.NodeSelectorOpNotIn,
		Values: []string{netmodel.ValueFalse}}
}

// domain is the requirement set the webhook adds for u1's selector
// {rack=r1, row=a}, keys sorted.
var domain = []corev1.NodeSelectorRequirement{in("rack", "r1"), in("row", "a")}

// u1Pool and ovPool are what a pod taking a new address from u1's or ov's
// pool (IPv4 only) gets.
var (
	u1Pool = append(clone(domain), notFull("u1", family.IPv4))
	ovPool = []corev1.NodeSelectorRequirement{notFull("ov", family.IPv4)}
)

func clone(r []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	return append([]corev1.NodeSelectorRequirement(nil), r...)
}

func cat(rs ...[]corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func TestMutation(t *testing.T) {
	seed(t, overlayNet("ov"), underlayNet("u1", vlan, sel("rack", "r1", "row", "a")),
		underlayNet("ds", vlan, sel("rack", "r2")),
		subnetObj("ov4", "ov", "10.0.0.0/16"), subnetObj("u4", "u1", "10.2.0.0/24", gw("10.2.0.1")),
		subnetObj("ds4", "ds", "10.3.0.0/24", gw("10.3.0.1")), subnetObj("ds6", "ds", "fd00:3::/64", gw("fd00:3::1")),
		subnetObj("ds6-private", "ds", "fd00:4::/64", gw("fd00:4::1"), private()),
		nsObj("domain-ns", sel(annNet, "u1")),
		keptFor(instance("default", "db-0-ip", "u1", "u4", "10.2.0.5/24"), "db"))
	gpu := corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpExists}
	byName := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}
	preferred := []corev1.PreferredSchedulingTerm{{Weight: 5, Preference: term(in("disk", "ssd"))}}
	withPreferred := required(term(gpu), corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{byName}})
	withPreferred.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = preferred
	wantMerged := required(term(cat([]corev1.NodeSelectorRequirement{gpu}, u1Pool)...),
		corev1.NodeSelectorTerm{MatchExpressions: u1Pool, MatchFields: []corev1.NodeSelectorRequirement{byName}})
	wantMerged.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = preferred
	overlayMerged := required(term(gpu, ovPool[0]),
		corev1.NodeSelectorTerm{MatchExpressions: ovPool, MatchFields: []corev1.NodeSelectorRequirement{byName}})
	overlayMerged.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = preferred
	dsDomain := in("rack", "r2")
	cases := []struct {
		name string
		pod  *corev1.Pod
		want *corev1.Affinity
	}{
		{"underlay pod without affinity", podObj("default", "plain", sel(annNet, "u1")), required(term(u1Pool...))},
		{"underlay pod by subnet: domain only", podObj("default", "by-subnet", sel(annSub, "u4")), required(term(domain...))},
		{"namespace's underlay", podObj("domain-ns", "inherited", nil), required(term(u1Pool...))},
		{"pod's own terms kept, each ANDed", podObj("default", "own", sel(annNet, "u1"), withAffinity(withPreferred)), wantMerged},
		{"already constrained", podObj("default", "already", sel(annNet, "u1"),
			withAffinity(required(term(cat([]corev1.NodeSelectorRequirement{gpu}, u1Pool)...)))),
			required(term(cat([]corev1.NodeSelectorRequirement{gpu}, u1Pool)...))},
		{"overlay pod: capacity only", podObj("default", "overlay", sel(annNet, "ov")), required(term(ovPool...))},
		{"overlay pod keeps its own affinity", podObj("domain-ns", "own-overlay", sel(annNet, "ov"), withAffinity(withPreferred)),
			overlayMerged},
		{"pod without annotations: the Overlay network's capacity", podObj("default", "none", nil), required(term(ovPool...))},
		{"public families of a dual-stack network, private subnet ignored", podObj("default", "dual", sel(annNet, "ds")),
			required(term(dsDomain, notFull("ds", family.IPv4), notFull("ds", family.IPv6)))},
		{"ip-family IPv6", podObj("default", "v6", sel(annNet, "ds", annFam, estuaryv1.IPFamilyIPv6)),
			required(term(dsDomain, notFull("ds", family.IPv6)))},
		{"StatefulSet pod whose addresses are kept: domain only", podObj("default", "db-0", sel(annNet, "u1"), ownedBy("db")),
			required(term(domain...))},
		{"StatefulSet pod without kept addresses", podObj("default", "db-1", sel(annNet, "u1"), ownedBy("db")),
			required(term(u1Pool...))},
		{"host network pod unchanged", podObj("default", "host", sel(annNet, "u1"), hostNet()), nil},
		{"pod bound to a node: domain only", podObj("default", "bound", sel(annNet, "u1"), boundTo("n1")), required(term(domain...))},
		{"overlay pod bound to a node unchanged", podObj("default", "bound-overlay", sel(annNet, "ov"), boundTo("n1")), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			create(t, c.pod)
			got := &corev1.Pod{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(c.pod), got); err != nil {
				t.Fatalf("get pod: %v", err)
			}
			if !equality.Semantic.DeepEqual(got.Spec.Affinity, c.want) {
				t.Errorf("affinity =\n%+v\nwant\n%+v", affinityString(got.Spec.Affinity), affinityString(c.want))
			}
		})
	}
}

// TestFullNetworkNotSchedulable: the affinity the webhook gives a pod of
// u1 keeps it off a node whose label says u1 has no free IPv4 address, as
// the scheduler's node affinity filter evaluates it, and lets it onto one
// that has one, or has not been labelled yet.
func TestFullNetworkNotSchedulable(t *testing.T) {
	seed(t, underlayNet("u9", vlan, sel("rack", "r9")), subnetObj("u9-4", "u9", "10.9.0.0/24", gw("10.9.0.1")))
	pod := podObj("default", "full", sel(annNet, "u9"))
	create(t, pod)
	got := &corev1.Pod{}
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	key := netmodel.AvailableKey("u9", family.IPv4)
	for _, c := range []struct {
		labels map[string]string
		fits   bool
	}{
		{sel("rack", "r9", key, netmodel.ValueFalse), false},
		{sel("rack", "r9", key, netmodel.ValueTrue), true},
		{sel("rack", "r9"), true},
		{sel("rack", "r1", key, netmodel.ValueTrue), false},
	} {
		if fits := fitsRequired(t, got, c.labels); fits != c.fits {
			t.Errorf("node labels %v: pod fits %v, want %v (affinity %s)", c.labels, fits, c.fits, affinityString(got.Spec.Affinity))
		}
	}
}

// fitsRequired evaluates the pod's required node affinity against node
// labels: some term whose every expression matches.
func fitsRequired(t *testing.T, pod *corev1.Pod, nodeLabels map[string]string) bool {
	t.Helper()
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil ||
		pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	}
	for _, tm := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		s := labels.NewSelector()
		for _, e := range tm.MatchExpressions {
			r, err := labels.NewRequirement(e.Key, ops[e.Operator], e.Values)
			if err != nil {
				t.Fatalf("requirement %v: %v", e, err)
			}
			s = s.Add(*r)
		}
		if s.Matches(labels.Set(nodeLabels)) {
			return true
		}
	}
	return false
}

func private() subnetOpt {
	return func(s *estuaryv1.Subnet) { s.Spec.Private = true }
}

func ownedBy(set string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set,
			UID: types.UID("u-" + set), Controller: ptr.To(true)}}
	}
}

func boundTo(node string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeName = node }
}

func hostNet() podOpt {
	return func(p *corev1.Pod) { p.Spec.HostNetwork = true }
}

// keptFor makes ipi an address the StatefulSet set keeps for its pod
// <set>-0.
func keptFor(ipi *estuaryv1.IPInstance, set string) *estuaryv1.IPInstance {
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: "StatefulSet", Name: set, UID: "u-" + set}
	ipi.Spec.Binding.PodName = set + "-0"
	ipi.Spec.Binding.StatefulOrdinal = ptr.To[int32](0)
	return ipi
}

func affinityString(a *corev1.Affinity) string {
	if a == nil {
		return "<nil>"
	}
	return a.String()
}
