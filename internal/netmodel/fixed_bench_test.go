package netmodel

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// benchSubnets are n subnets of network ov, half IPv4 /16s and half IPv6
// /64s, each with the most excluded ranges the CRD allows (32), above the
// addresses benchPool names.
func benchSubnets(n int) []estuaryv1.Subnet {
	var out []estuaryv1.Subnet
	for i := range n / 2 {
		var ex4, ex6 []estuaryv1.AddressOrRange
		for j := range 32 {
			ex4 = append(ex4, estuaryv1.AddressOrRange(fmt.Sprintf("10.%d.%d.0-10.%d.%d.9", i, 100+j, i, 100+j)))
			ex6 = append(ex6, estuaryv1.AddressOrRange(fmt.Sprintf("fd00:%x::%x:0-fd00:%x::%x:9", i, 100+j, i, 100+j)))
		}
		out = append(out,
			estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("v4-%d", i), UID: "u-1", Generation: 1},
				Spec: estuaryv1.SubnetSpec{Network: "ov", Range: estuaryv1.AddressRange{Version: 4, CIDR: fmt.Sprintf("10.%d.0.0/16", i), ExcludeIPs: ex4}}},
			estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("v6-%d", i), UID: "u-1", Generation: 1},
				Spec: estuaryv1.SubnetSpec{Network: "ov", Range: estuaryv1.AddressRange{Version: 6, CIDR: fmt.Sprintf("fd00:%x::/64", i), ExcludeIPs: ex6}}})
	}
	return out
}

func benchPool(entries, subnets int) string {
	items := make([]string, entries)
	for i := range items {
		s := subnets/2 - 1 - i%(subnets/2)
		items[i] = fmt.Sprintf("10.%d.%d.%d/fd00:%x::%x", s, 1+i/250, 1+i%250, s, i+1)
	}
	return strings.Join(items, ",")
}

// BenchmarkCheckAddresses checks a dual-stack ip-pool of MaxPoolEntries
// entries against 64 subnets: parsing each subnet once per check (the
// manager) and with the layouts cached across checks (the webhook).
func BenchmarkCheckAddresses(b *testing.B) {
	subnets := benchSubnets(64)
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "ov"}, Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
		Annotations: map[string]string{estuaryv1.AnnotationIPPool: benchPool(MaxPoolEntries, 64)}}}
	sel, err := SelectionFor(pod, nil)
	if err != nil {
		b.Fatal(err)
	}
	fx, err := FixedFor(&sel, pod, nil)
	if err != nil {
		b.Fatal(err)
	}
	for name, c := range map[string]Claims{"parsed": {}, "cached": {Layouts: NewLayouts()}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fx.CheckAddresses(n, subnets, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
