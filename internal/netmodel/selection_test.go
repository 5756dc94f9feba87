package netmodel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func annotatedPod(ann map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: ann}}
}

func subnetOf(name, network, cidr string) estuaryv1.Subnet {
	v := int32(4)
	if strings.Contains(cidr, ":") {
		v = 6
	}
	return estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.SubnetSpec{Network: network, Range: estuaryv1.AddressRange{Version: v, CIDR: cidr}}}
}

// wantDenial fails unless err is a *Denial of the subnet annotation whose
// text has every one of want.
func wantDenial(t *testing.T, err error, want ...string) {
	t.Helper()
	var d *Denial
	if !errors.As(err, &d) {
		t.Fatalf("error %v is not a *Denial", err)
	}
	if d.Field != "metadata.annotations["+estuaryv1.AnnotationSubnet+"]" {
		t.Errorf("denial names field %q, want the subnet annotation", d.Field)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial does not say %q: %v", w, err)
		}
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// The subnet annotation is an ordered list: several subnets of one family
// keep the order written, spaces around names are dropped, and the list is
// capped at MaxSubnets.
func TestSelectionSubnetList(t *testing.T) {
	for _, c := range []struct {
		value string
		want  []string
	}{
		{"pods-v4", []string{"pods-v4"}},
		{"pods-v4,pods-v6", []string{"pods-v4", "pods-v6"}},
		{"pods-b, pods-a ,pods-v6", []string{"pods-b", "pods-a", "pods-v6"}},
		{strings.Join(names("s", MaxSubnets), ","), names("s", MaxSubnets)},
	} {
		sel, err := SelectionFor(annotatedPod(map[string]string{estuaryv1.AnnotationSubnet: c.value}), nil)
		if err != nil {
			t.Fatalf("%q: %v", c.value, err)
		}
		if !slices.Equal(sel.Subnets, c.want) {
			t.Errorf("%q: subnets %q, want %q in that order", c.value, sel.Subnets, c.want)
		}
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns",
		Annotations: map[string]string{estuaryv1.AnnotationSubnet: "pods-b,pods-a"}}}
	sel, err := SelectionFor(annotatedPod(nil), ns)
	if err != nil || !slices.Equal(sel.Subnets, []string{"pods-b", "pods-a"}) || sel.From[estuaryv1.AnnotationSubnet] != "ns" {
		t.Errorf("inherited list: %q from %q, %v", sel.Subnets, sel.From[estuaryv1.AnnotationSubnet], err)
	}

	for value, want := range map[string][]string{
		strings.Join(names("s", MaxSubnets+1), ","): {"names 17 subnets", "at most 16"},
		"pods-a,pods-b,pods-a":                      {`names subnet "pods-a" twice`},
		"pods-a,,pods-b":                            {`"" is not a valid subnet name`},
		"pods-a,Pods_B":                             {`"Pods_B" is not a valid subnet name`},
	} {
		_, err := SelectionFor(annotatedPod(map[string]string{estuaryv1.AnnotationSubnet: value}), nil)
		wantDenial(t, err, want...)
	}
}

// Several subnets of one family are admitted when they all belong to one
// network; they are refused when they span networks or leave the named one.
func TestResolveSeveralSubnetsOfOneFamily(t *testing.T) {
	networks := []estuaryv1.Network{network("o", estuaryv1.NetworkTypeOverlay, 4), network("u", estuaryv1.NetworkTypeUnderlay, 0)}
	subnets := []estuaryv1.Subnet{subnetOf("o4a", "o", "10.0.0.0/24"), subnetOf("o4b", "o", "10.0.1.0/24"),
		subnetOf("o6", "o", "fd00::/64"), subnetOf("u4", "u", "10.2.0.0/24")}
	resolve := func(ann map[string]string) (*estuaryv1.Network, error) {
		sel, err := SelectionFor(annotatedPod(ann), nil)
		if err != nil {
			return nil, err
		}
		return ResolveNetwork(&sel, networks, subnets)
	}
	for _, ann := range []map[string]string{
		{estuaryv1.AnnotationSubnet: "o4b,o4a"},
		{estuaryv1.AnnotationSubnet: "o4a,o4b,o6"},
		{estuaryv1.AnnotationSubnet: "o4b,o6,o4a", estuaryv1.AnnotationNetwork: "o"},
	} {
		n, err := resolve(ann)
		if err != nil || n == nil || n.Name != "o" {
			t.Errorf("%v: network %v, %v; want o", ann, n, err)
		}
	}
	_, err := resolve(map[string]string{estuaryv1.AnnotationSubnet: "o4a,o4b,u4"})
	wantDenial(t, err, `subnet "o4a"`, `subnet "u4"`, "spec.network differ")
	_, err = resolve(map[string]string{estuaryv1.AnnotationSubnet: "u4,o4a", estuaryv1.AnnotationNetwork: "u"})
	wantDenial(t, err, `subnet "o4a"`, `spec.network is "o"`, `requested network "u"`)
	_, err = resolve(map[string]string{estuaryv1.AnnotationSubnet: "o4a,o4c"})
	wantDenial(t, err, `subnet "o4c"`, "does not exist")
}
