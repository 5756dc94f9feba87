package netmodel

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// form is one way a fuzzed value is written: an annotation or a label, at
// estuary's key or hybridnet's.
type form struct {
	key   string
	label bool
}

// fuzzed are the keys the fuzzer writes and the forms of each, in
// precedence order after the estuary annotation.
var fuzzed = []struct {
	key   string
	forms []form
}{
	{estuaryv1.AnnotationSubnet, []form{{estuaryv1.AnnotationSubnet, false}, {estuaryv1.AnnotationSubnet, true},
		{HybridnetSubnet, false}, {HybridnetSubnet, true}}},
	{estuaryv1.AnnotationIPFamily, []form{{estuaryv1.AnnotationIPFamily, false}, {HybridnetIPFamily, false}}},
	{estuaryv1.AnnotationIPPool, []form{{estuaryv1.AnnotationIPPool, false}, {HybridnetIPPool, false}}},
	{estuaryv1.AnnotationIPRetain, []form{{estuaryv1.AnnotationIPRetain, false}, {HybridnetIPRetain, false}}},
	{estuaryv1.AnnotationNetworkType, []form{{estuaryv1.AnnotationNetworkType, false}, {estuaryv1.AnnotationNetworkType, true},
		{HybridnetNetworkType, false}, {HybridnetNetworkType, true}}},
}

// FuzzAliases writes arbitrary values in every form of the subnet,
// ip-family, ip-pool, ip-retain and network-type keys on a pod and its namespace. It
// never panics; a refusal is a Denial of the pod naming a form that was
// written; and the outcome is what a model of the rules predicts: on each
// object the first form written gives the value (translated from
// hybridnet's syntax), every other form written must parse and mean the
// same, and the pod's value wins over the namespace's. What is admitted
// reads exactly as the same values written as estuary annotations, and
// what such annotations would refuse is refused for the same reason.
func FuzzAliases(f *testing.F) {
	f.Add(uint16(0b0000_0100_0000_0001), "a,b", "a/b", "ipv4only", "10.0.0.5/fd00::5", "t", "IPv6")
	f.Add(uint16(0b0000_0000_1111_1111), "a", "a/b/c", "DualStack", "10.0.0.5", "maybe", "x")
	f.Add(uint16(0b1111_1111_0000_0000), "b, a", "a/b", "IPv4", "10.0.0.5,10.0.0.5", "0", "")
	f.Add(uint16(0xffff), "", "/", "", "", "", "")
	f.Add(uint16(0xffff), "globalbgp", "GlobalBGP", "UNDERLAY", "overlay", "GlobalBGP", "globalBGP")
	f.Fuzz(func(t *testing.T, mask uint16, v1, v2, v3, v4, v5, v6 string) {
		values := []string{v1, v2, v3, v4, v5, v6}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
		bit, val := 0, 0
		for _, k := range fuzzed {
			for _, fm := range k.forms {
				for _, m := range []*metav1.ObjectMeta{&pod.ObjectMeta, &ns.ObjectMeta} {
					if mask&(1<<(bit%16)) != 0 {
						write(m, fm, values[val%len(values)])
						val++
					}
					bit++
				}
			}
		}
		sel, err := SelectionFor(pod, ns)
		var fx Fixed
		if err == nil {
			fx, err = FixedFor(&sel, pod, ns)
		}
		if err != nil {
			var d *Denial
			if !errors.As(err, &d) || d.Kind != KindPod || !namesWritten(d.Field, pod, ns) {
				t.Fatalf("error %v is not a Denial naming a key written", err)
			}
		}
		want, wantErr := model(pod, ns)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("SelectionFor/FixedFor: %v; the model: %v (pod %v %v, namespace %v %v)", err, wantErr,
				pod.Annotations, pod.Labels, ns.Annotations, ns.Labels)
		}
		var d, wd *Denial
		if err != nil && errors.As(wantErr, &wd) && errors.As(err, &d) && d.Reason != wd.Reason {
			t.Fatalf("refused because %q; the same values as estuary annotations because %q", d.Reason, wd.Reason)
		}
		if err != nil || wantErr != nil {
			return
		}
		if !slices.Equal(sel.Subnets, want.sel.Subnets) || sel.IPFamily != want.sel.IPFamily || sel.NetworkType != want.sel.NetworkType ||
			!slices.EqualFunc(fx.Pool, want.fx.Pool, slices.Equal) || !equalBool(fx.Retain, want.fx.Retain) {
			t.Fatalf("read %v %s %v %v; as estuary annotations %v %s %v %v", sel.Subnets, sel.IPFamily, fx.Pool, fx.Retain,
				want.sel.Subnets, want.sel.IPFamily, want.fx.Pool, want.fx.Retain)
		}
	})
}

func write(m *metav1.ObjectMeta, fm form, v string) {
	if fm.label {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[fm.key] = v
		return
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[fm.key] = v
}

// namesWritten: field is a form written on the pod, or on the namespace
// (noted as inherited).
func namesWritten(field string, pod *corev1.Pod, ns *corev1.Namespace) bool {
	path, inherited := strings.CutSuffix(field, ` (inherited from namespace "ns")`)
	m := &pod.ObjectMeta
	if inherited {
		m = &ns.ObjectMeta
	}
	for k := range m.Annotations {
		if path == "metadata.annotations["+k+"]" {
			return true
		}
	}
	for k := range m.Labels {
		if path == "metadata.labels["+k+"]" {
			return true
		}
	}
	return false
}

type outcome struct {
	sel Selection
	fx  Fixed
}

// model resolves every fuzzed key by the rules, independently of readOn,
// and reads the result written as estuary annotations only.
func model(pod *corev1.Pod, ns *corev1.Namespace) (outcome, error) {
	plainPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: map[string]string{}}}
	plainNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: map[string]string{}}}
	for _, k := range fuzzed {
		v, set, err := modelOn(&pod.ObjectMeta, k.key, k.forms)
		if err != nil {
			return outcome{}, err
		}
		if set {
			plainPod.Annotations[k.key] = v
			continue
		}
		if v, set, err = modelOn(&ns.ObjectMeta, k.key, k.forms); err != nil {
			return outcome{}, err
		}
		if set {
			plainNS.Annotations[k.key] = v
		}
	}
	sel, err := SelectionFor(plainPod, plainNS)
	if err != nil {
		return outcome{}, err
	}
	fx, err := FixedFor(&sel, plainPod, plainNS)
	return outcome{sel: sel, fx: fx}, err
}

// modelOn is the value of key on one object: the first form set, every
// other one set agreeing with it.
func modelOn(m *metav1.ObjectMeta, key string, forms []form) (string, bool, error) {
	var values []string
	for _, fm := range forms {
		var v string
		var set bool
		if fm.label {
			v = m.Labels[fm.key]
			set = v != ""
		} else {
			v, set = m.Annotations[fm.key]
			set = set && (fm.key == key || v != "")
		}
		if !set {
			continue
		}
		if fm.key != key {
			_, tv, _, err := Translate(fm.key, v)
			if err != nil {
				return "", true, err
			}
			v = tv
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return "", false, nil
	}
	for _, v := range values[1:] {
		if withoutSpaces(v) != withoutSpaces(values[0]) {
			return "", true, errors.New("forms disagree")
		}
	}
	return values[0], true, nil
}

func withoutSpaces(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

func equalBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
