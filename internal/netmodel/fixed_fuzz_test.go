package netmodel

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// FuzzFixedFor feeds arbitrary annotation values to FixedFor: it never
// panics, refuses with a Denial naming an annotation, and what it accepts
// keeps its promises (one address per family, every pool entry of the same
// families and no address twice, pools of at most MaxPoolEntries,
// canonical unicast MACs, a positive TTL, and CheckRetention holding it to
// the bound).
func FuzzFixedFor(f *testing.F) {
	f.Add("10.0.0.5", "", "", "", "true", "24h")
	f.Add("10.0.0.5,fd00::5", "", "0a:58:0a:00:00:05", "", "", "")
	f.Add("", "10.0.0.5/fd00::5,10.0.0.6/fd00::6", "", "0a:00:00:00:00:01,0a:00:00:00:00:02", "false", "Never")
	f.Add("fd00::5,10.0.0.5", "10.0.0.1,fd00::1", "01:00:5e:00:00:01", "x", "maybe", "-1s")
	f.Add(" 10.0.0.5 ", "10.0.0.5,,", "00:00:00:00:00:00", "0A:00:00:00:00:01,0a:00:00:00:00:01", "TRUE", "0s")
	f.Add("", "", "", "", "true", "999999h")
	f.Add("", "", "", "", "", "Never")
	f.Fuzz(func(t *testing.T, addr, pool, mac, macPool, retain, ttl string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: map[string]string{}}}
		for k, v := range map[string]string{
			estuaryv1.AnnotationIPAddress: addr, estuaryv1.AnnotationIPPool: pool, estuaryv1.AnnotationMACAddress: mac,
			estuaryv1.AnnotationMACPool: macPool, estuaryv1.AnnotationIPRetain: retain, estuaryv1.AnnotationIPRetainTTL: ttl,
		} {
			if v != "" {
				pod.Annotations[k] = v
			}
		}
		sel := Selection{Pod: "ns/p", Namespace: "ns", From: map[string]string{}}
		fx, err := FixedFor(&sel, pod, nil)
		if err != nil {
			var d *Denial
			if !errors.As(err, &d) || d.Kind != KindPod || d.Field == "" {
				t.Fatalf("error %v is not a Denial naming a field of the pod", err)
			}
			return
		}
		checkEntry(t, fx.Addresses)
		seen := map[netip.Addr]bool{}
		for _, e := range fx.Pool {
			checkEntry(t, e)
			if familiesOf(e) != familiesOf(fx.Pool[0]) {
				t.Fatalf("pool %v mixes families", fx.Pool)
			}
			for _, a := range e {
				if seen[a] {
					t.Fatalf("pool %v names %s twice", fx.Pool, a)
				}
				seen[a] = true
			}
		}
		for _, m := range append([]string{fx.MAC}, fx.MACPool...) {
			if m == "" {
				continue
			}
			hw, err := net.ParseMAC(m)
			if err != nil || hw.String() != m || hw[0]&1 != 0 {
				t.Fatalf("accepted MAC %q is not canonical unicast", m)
			}
		}
		if fx.TTL != nil && *fx.TTL <= 0 {
			t.Fatalf("accepted TTL %v", *fx.TTL)
		}
		if len(fx.Pool) > MaxPoolEntries || len(fx.MACPool) > MaxPoolEntries {
			t.Fatalf("accepted pools of %d and %d entries", len(fx.Pool), len(fx.MACPool))
		}
		checkRetentionBound(t, &fx)
	})
}

// checkRetentionBound: CheckRetention refuses with a Denial of
// ip-retain-ttl, and what it admits of a retaining pod is at most the
// maximum and Never only for a StatefulSet's pod (the network allows it
// nowhere).
func checkRetentionBound(t *testing.T, fx *Fixed) {
	t.Helper()
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "ov"}}
	b := Bounds{MaxRetainTTL: 48 * time.Hour}
	for _, stateful := range []bool{false, true} {
		err := fx.CheckRetention(b, n, stateful)
		if err != nil {
			var d *Denial
			if !errors.As(err, &d) || d.Field != "metadata.annotations["+estuaryv1.AnnotationIPRetainTTL+"]" {
				t.Fatalf("CheckRetention error %v is not a Denial of ip-retain-ttl", err)
			}
			continue
		}
		if !fx.TTLSet || !fx.retains(stateful) {
			continue
		}
		if fx.TTL != nil && *fx.TTL > b.MaxTTL() || fx.TTL == nil && !stateful {
			t.Fatalf("admitted ip-retain-ttl %q (stateful %v) over the bound", fx.ttlText, stateful)
		}
	}
}

func checkEntry(t *testing.T, e []netip.Addr) {
	t.Helper()
	if len(e) > 2 || (len(e) == 2 && (e[0].Is4() == e[1].Is4() || !e[0].Is4())) {
		t.Fatalf("entry %v is not one address per family, IPv4 first", e)
	}
	for _, a := range e {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("entry %v holds %v", e, a)
		}
	}
}
