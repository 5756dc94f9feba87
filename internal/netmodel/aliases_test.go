package netmodel

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Translate maps each hybridnet key to its estuary annotation and each
// value in hybridnet's syntax to estuary's, and refuses what hybridnet's
// syntax does not allow.
func TestTranslate(t *testing.T) {
	for _, c := range []struct {
		key, value string
		wantKey    string
		want       string
		bad        bool
	}{
		{HybridnetNetwork, "underlay-a", estuaryv1.AnnotationNetwork, "underlay-a", false},
		{HybridnetSubnet, "sub-v4", estuaryv1.AnnotationSubnet, "sub-v4", false},
		{HybridnetSubnet, "sub-v4/sub-v6", estuaryv1.AnnotationSubnet, "sub-v4,sub-v6", false},
		{HybridnetSubnet, "a/b/c", "", "", true},
		{HybridnetSubnet, "a/a", "", "", true},
		{HybridnetSubnet, "a,b", "", "", true},
		{HybridnetSubnet, "a/", "", "", true},
		{HybridnetNetworkType, "underlay", estuaryv1.AnnotationNetworkType, "Underlay", false},
		{HybridnetNetworkType, "OVERLAY", estuaryv1.AnnotationNetworkType, "Overlay", false},
		{HybridnetNetworkType, "globalbgp", estuaryv1.AnnotationNetworkType, "GlobalBGP", false},
		{HybridnetNetworkType, "vxlan", "", "", true},
		{HybridnetIPFamily, "IPv4Only", estuaryv1.AnnotationIPFamily, "IPv4", false},
		{HybridnetIPFamily, "ipv4", estuaryv1.AnnotationIPFamily, "IPv4", false},
		{HybridnetIPFamily, "IPV6ONLY", estuaryv1.AnnotationIPFamily, "IPv6", false},
		{HybridnetIPFamily, "ipv6", estuaryv1.AnnotationIPFamily, "IPv6", false},
		{HybridnetIPFamily, "dualstack", estuaryv1.AnnotationIPFamily, "DualStack", false},
		{HybridnetIPFamily, "IPv5", "", "", true},
		{HybridnetIPRetain, "True", estuaryv1.AnnotationIPRetain, "true", false},
		{HybridnetIPRetain, "1", estuaryv1.AnnotationIPRetain, "true", false},
		{HybridnetIPRetain, "F", estuaryv1.AnnotationIPRetain, "false", false},
		{HybridnetIPRetain, "0", estuaryv1.AnnotationIPRetain, "false", false},
		{HybridnetIPRetain, "yes", "", "", true},
		{HybridnetIPPool, "10.0.0.5/fd00::5,10.0.0.6/fd00::6", estuaryv1.AnnotationIPPool, "10.0.0.5/fd00::5,10.0.0.6/fd00::6", false},
		{HybridnetMACPool, "0a:00:00:00:00:01,0a:00:00:00:00:02", estuaryv1.AnnotationMACPool, "0a:00:00:00:00:01,0a:00:00:00:00:02", false},
	} {
		key, got, ok, err := Translate(c.key, c.value)
		if !ok {
			t.Errorf("%s is not an alias", c.key)
			continue
		}
		if c.bad {
			if err == nil {
				t.Errorf("%s=%q: translated to %q, want a refusal", c.key, c.value, got)
			}
			continue
		}
		if err != nil || key != c.wantKey || got != c.want {
			t.Errorf("%s=%q: %s=%q, %v; want %s=%q", c.key, c.value, key, got, err, c.wantKey, c.want)
		}
	}
	for _, k := range []string{"networking.alibaba.com/ip", estuaryv1.AnnotationNetwork, "networking.alibaba.com/network"} {
		if _, _, ok, _ := Translate(k, "x"); ok {
			t.Errorf("%s is taken for an alias", k)
		}
	}
}

func meta(ann, lbls map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: ann, Labels: lbls}
}

// A pod selects with hybridnet's keys, as annotations or labels, or
// estuary's labels, exactly as with estuary's annotations.
func TestSelectionAliases(t *testing.T) {
	for _, c := range []struct {
		name      string
		ann, lbls map[string]string
		want      Selection
	}{
		{"hybridnet annotations", map[string]string{HybridnetNetwork: "u", HybridnetSubnet: "u4/u6",
			HybridnetNetworkType: "underlay", HybridnetIPFamily: "DualStack"}, nil,
			Selection{Network: "u", Subnets: []string{"u4", "u6"}, NetworkType: estuaryv1.NetworkTypeUnderlay, IPFamily: "DualStack"}},
		{"hybridnet labels", nil, map[string]string{HybridnetNetwork: "u", HybridnetSubnet: "u4", HybridnetNetworkType: "Underlay"},
			Selection{Network: "u", Subnets: []string{"u4"}, NetworkType: estuaryv1.NetworkTypeUnderlay}},
		{"estuary labels", nil, map[string]string{estuaryv1.AnnotationNetwork: "u", estuaryv1.AnnotationSubnet: "u4",
			estuaryv1.AnnotationNetworkType: "Underlay"},
			Selection{Network: "u", Subnets: []string{"u4"}, NetworkType: estuaryv1.NetworkTypeUnderlay}},
		{"two forms, one meaning", map[string]string{estuaryv1.AnnotationSubnet: "u4, u6", HybridnetSubnet: "u4/u6"}, nil,
			Selection{Subnets: []string{"u4", "u6"}}},
		{"empty hybridnet value is unset", map[string]string{HybridnetNetwork: ""}, nil, Selection{}},
		{"hybridnet GlobalBGP in any case", map[string]string{HybridnetNetworkType: "globalbgp"}, nil,
			Selection{NetworkType: estuaryv1.NetworkTypeGlobalBGP}},
		{"estuary GlobalBGP label", nil, map[string]string{estuaryv1.AnnotationNetworkType: "GlobalBGP"},
			Selection{NetworkType: estuaryv1.NetworkTypeGlobalBGP}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: meta(c.ann, c.lbls)}
			sel, err := SelectionFor(pod, nil)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Network != c.want.Network || !slices.Equal(sel.Subnets, c.want.Subnets) ||
				sel.NetworkType != c.want.NetworkType || sel.IPFamily != c.want.IPFamily {
				t.Errorf("selection %+v, want %+v", sel, c.want)
			}
		})
	}
}

// Precedence: on one object the estuary annotation, then estuary's label,
// then hybridnet's annotation, then its label; the pod's keys in any form
// over its namespace's. Denials name the key written.
func TestAliasPrecedence(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns",
		Annotations: map[string]string{estuaryv1.AnnotationNetwork: "from-ns", estuaryv1.AnnotationIPFamily: "IPv6"}}}
	pod := &corev1.Pod{ObjectMeta: meta(map[string]string{HybridnetNetwork: "from-pod"}, nil)}
	sel, err := SelectionFor(pod, ns)
	if err != nil || sel.Network != "from-pod" || sel.IPFamily != "IPv6" || sel.From[estuaryv1.AnnotationIPFamily] != "ns" {
		t.Fatalf("pod's hybridnet key over namespace's estuary key: %+v, %v", sel, err)
	}
	if f := sel.field(estuaryv1.AnnotationNetwork); f != "metadata.annotations["+HybridnetNetwork+"]" {
		t.Errorf("field of the network is %q, want the hybridnet annotation", f)
	}

	ns.Annotations = map[string]string{HybridnetSubnet: "a/b"}
	ns.Labels = map[string]string{HybridnetNetworkType: "overlay"}
	sel, err = SelectionFor(&corev1.Pod{ObjectMeta: meta(nil, nil)}, ns)
	if err != nil || !slices.Equal(sel.Subnets, []string{"a", "b"}) || sel.NetworkType != estuaryv1.NetworkTypeOverlay {
		t.Fatalf("namespace's hybridnet forms: %+v, %v", sel, err)
	}
	if f := sel.field(estuaryv1.AnnotationNetworkType); f != "metadata.labels["+HybridnetNetworkType+`] (inherited from namespace "ns")` {
		t.Errorf("field of the inherited type is %q", f)
	}

	for _, c := range []struct {
		name      string
		ann, lbls map[string]string
		want      []string
	}{
		{"estuary and hybridnet annotations differ", map[string]string{estuaryv1.AnnotationNetwork: "a", HybridnetNetwork: "b"}, nil,
			[]string{"metadata.annotations[" + estuaryv1.AnnotationNetwork + `] is "a"`, "metadata.annotations[" + HybridnetNetwork + `] on the same object is "b"`}},
		{"hybridnet annotation and label differ", map[string]string{HybridnetNetworkType: "Overlay"},
			map[string]string{HybridnetNetworkType: "Underlay"},
			[]string{"metadata.annotations[" + HybridnetNetworkType + `] is "Overlay"`, "metadata.labels[" + HybridnetNetworkType + "]"}},
		{"estuary label and hybridnet annotation differ", map[string]string{HybridnetSubnet: "a/b"},
			map[string]string{estuaryv1.AnnotationSubnet: "a"},
			[]string{"metadata.labels[" + estuaryv1.AnnotationSubnet + `] is "a"`, "metadata.annotations[" + HybridnetSubnet + `] on the same object is "a/b"`}},
		{"annotations agree, a label does not", map[string]string{estuaryv1.AnnotationSubnet: "u4, u6", HybridnetSubnet: "u4/u6"},
			map[string]string{HybridnetSubnet: "u4"},
			[]string{"metadata.annotations[" + estuaryv1.AnnotationSubnet + `] is "u4, u6"`, "metadata.labels[" + HybridnetSubnet + `] on the same object is "u4"`}},
		{"bad hybridnet family", map[string]string{HybridnetIPFamily: "IPv5"}, nil,
			[]string{"metadata.annotations[" + HybridnetIPFamily + "]", `"IPv5" is not IPv4Only`}},
		{"bad hybridnet subnets", map[string]string{HybridnetSubnet: "a/b/c"}, nil,
			[]string{"metadata.annotations[" + HybridnetSubnet + "]", "names 3 subnets"}},
		{"bad hybridnet label under a good annotation", map[string]string{estuaryv1.AnnotationNetworkType: "Overlay"},
			map[string]string{HybridnetNetworkType: "bgp"}, []string{"metadata.labels[" + HybridnetNetworkType + "]", `"bgp"`}},
		{"an unknown type", map[string]string{estuaryv1.AnnotationNetworkType: "globalbgp"}, nil,
			[]string{"metadata.annotations[" + estuaryv1.AnnotationNetworkType + "]", `"globalbgp" is not Overlay, Underlay or GlobalBGP`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := SelectionFor(&corev1.Pod{ObjectMeta: meta(c.ann, c.lbls)}, nil)
			requireDenial(t, err, c.want...)
		})
	}
}

// The fixed-address keys: hybridnet's ip-pool, mac-pool and ip-retain read
// as estuary's; a conflict is refused naming both keys; TemplateRetain reads
// a StatefulSet template's hybridnet ip-retain.
func TestFixedAliases(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: meta(map[string]string{HybridnetIPPool: "10.0.0.5/fd00::5,10.0.0.6/fd00::6",
		HybridnetMACPool: "0a:00:00:00:00:01,0A:00:00:00:00:02", HybridnetIPRetain: "F"}, nil)}
	sel := Selection{Pod: "ns/p", Namespace: "ns", From: map[string]string{}}
	fx, err := FixedFor(&sel, pod, nil)
	if err != nil || len(fx.Pool) != 2 || len(fx.MACPool) != 2 || fx.MACPool[1] != "0a:00:00:00:00:02" || fx.Retain == nil || *fx.Retain {
		t.Fatalf("hybridnet pool, MAC pool and ip-retain: %+v, %v", fx, err)
	}
	if f := sel.field(estuaryv1.AnnotationIPPool); f != "metadata.annotations["+HybridnetIPPool+"]" {
		t.Errorf("ip-pool field %q", f)
	}

	bad := &corev1.Pod{ObjectMeta: meta(map[string]string{HybridnetIPPool: "10.0.0.5,10.0.0.x"}, nil)}
	_, err = FixedFor(&Selection{Pod: "ns/p", From: map[string]string{}}, bad, nil)
	requireDenial(t, err, "metadata.annotations["+HybridnetIPPool+"]", `"10.0.0.x" is not an IP address`)

	conflict := &corev1.Pod{ObjectMeta: meta(map[string]string{estuaryv1.AnnotationIPRetain: "true", HybridnetIPRetain: "0"}, nil)}
	_, err = FixedFor(&Selection{Pod: "ns/p", From: map[string]string{}}, conflict, nil)
	requireDenial(t, err, "metadata.annotations["+estuaryv1.AnnotationIPRetain+`] is "true"`, HybridnetIPRetain+`] on the same object is "0"`)

	same := &corev1.Pod{ObjectMeta: meta(map[string]string{estuaryv1.AnnotationIPRetain: "false", HybridnetIPRetain: "FALSE"}, nil)}
	if fx, err := FixedFor(&Selection{Pod: "ns/p", From: map[string]string{}}, same, nil); err != nil || fx.Retain == nil || *fx.Retain {
		t.Errorf("estuary false and hybridnet FALSE: %+v, %v", fx.Retain, err)
	}

	for ann, want := range map[string]*bool{
		HybridnetIPRetain:            ptrBool(false),
		estuaryv1.AnnotationIPRetain: ptrBool(false),
		"":                           nil,
	} {
		m := metav1.ObjectMeta{}
		if ann == HybridnetIPRetain {
			m.Annotations = map[string]string{ann: "0"}
		} else if ann != "" {
			m.Annotations = map[string]string{ann: "false"}
		}
		got := TemplateRetain(m)
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("TemplateRetain(%v) = %v, want %v", m.Annotations, got, want)
		}
	}
	if got := TemplateRetain(metav1.ObjectMeta{Annotations: map[string]string{HybridnetIPRetain: "maybe"}}); got != nil {
		t.Errorf("TemplateRetain of an unparsable value = %v, want nil", *got)
	}
}

func ptrBool(b bool) *bool { return &b }

func requireDenial(t *testing.T, err error, want ...string) {
	t.Helper()
	var d *Denial
	if !errors.As(err, &d) {
		t.Fatalf("error %v is not a *Denial", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial does not say %q: %v", w, err)
		}
	}
}
