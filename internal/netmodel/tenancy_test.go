package netmodel

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// fixedOf reads pod's fixed-address annotations, in namespace ns (with
// labels nsLabels), failing the test on a denial.
func fixedOf(t *testing.T, ann map[string]string, nsLabels map[string]string) (Fixed, Selection) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p", Annotations: ann}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: nsLabels}}
	sel, err := SelectionFor(pod, ns)
	if err != nil {
		t.Fatal(err)
	}
	fx, err := FixedFor(&sel, pod, ns)
	if err != nil {
		t.Fatal(err)
	}
	return fx, sel
}

// wantDenied fails unless err is a *Denial of the pod whose text has
// every one of want.
func wantDenied(t *testing.T, err error, want ...string) {
	t.Helper()
	var d *Denial
	if !errors.As(err, &d) || d.Kind != KindPod {
		t.Fatalf("error %v is not a *Denial of a pod; want one saying %q", err, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial %q does not say %q", err, w)
		}
	}
}

func byName(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: name}}
}

func TestCheckRetention(t *testing.T) {
	ret, ttl := estuaryv1.AnnotationIPRetain, estuaryv1.AnnotationIPRetainTTL
	plain := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "ov"}}
	allowing := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "ov"},
		Spec: estuaryv1.NetworkSpec{Retention: &estuaryv1.NetworkRetention{NeverNamespaceSelector: byName("team")}}}
	elsewhere := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "ov"},
		Spec: estuaryv1.NetworkSpec{Retention: &estuaryv1.NetworkRetention{NeverNamespaceSelector: byName("other")}}}
	every := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "ov"},
		Spec: estuaryv1.NetworkSpec{Retention: &estuaryv1.NetworkRetention{NeverNamespaceSelector: &metav1.LabelSelector{}}}}
	for _, c := range []struct {
		name     string
		ann      map[string]string
		n        *estuaryv1.Network
		stateful bool
		bounds   Bounds
		want     []string // nil: admitted
	}{
		{"the maximum itself", map[string]string{ret: "true", ttl: "168h"}, plain, false, Bounds{}, nil},
		{"over the default maximum", map[string]string{ret: "true", ttl: "999999h"}, plain, false, Bounds{},
			[]string{`pod "team/p"`, ann(ttl), `"999999h" is longer than the cluster's maximum retention 168h0m0s`, "--max-retain-ttl"}},
		{"over a maximum set by the administrator", map[string]string{ret: "true", ttl: "2h"}, plain, false, Bounds{MaxRetainTTL: time.Hour},
			[]string{`"2h" is longer than the cluster's maximum retention 1h0m0s`}},
		{"a long ttl on a pod that does not retain", map[string]string{ttl: "999999h"}, plain, false, Bounds{}, nil},
		{"Never where no network allows it", map[string]string{ret: "true", ttl: "Never"}, plain, false, Bounds{},
			[]string{`pod "team/p"`, ann(ttl), `is Never, which network "ov" allows only to pods of the namespaces its spec.retention.neverNamespaceSelector selects (it is unset, so no namespace may); ask for a duration of at most 168h0m0s instead`}},
		{"Never where the network allows another namespace", map[string]string{ret: "true", ttl: "Never"}, elsewhere, false, Bounds{},
			[]string{`it does not select namespace "team"`}},
		{"Never where the network allows the namespace", map[string]string{ret: "true", ttl: "Never"}, allowing, false, Bounds{}, nil},
		{"Never where the network allows every namespace", map[string]string{ret: "true", ttl: "Never"}, every, false, Bounds{}, nil},
		{"Never on a StatefulSet's pod", map[string]string{ttl: "Never"}, plain, true, Bounds{}, nil},
		{"a StatefulSet's ttl over the maximum", map[string]string{ttl: "200h"}, plain, true, Bounds{}, []string{`"200h" is longer`}},
		{"a StatefulSet that does not retain", map[string]string{ret: "false", ttl: "200h"}, plain, true, Bounds{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx, _ := fixedOf(t, c.ann, nil)
			err := fx.CheckRetention(c.bounds, c.n, c.stateful)
			if c.want == nil {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				return
			}
			wantDenied(t, err, c.want...)
		})
	}
}

// A namespace's default ip-retain-ttl is bounded too, and the denial names
// the namespace it came from.
func TestCheckRetentionOfNamespaceDefault(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p",
		Annotations: map[string]string{estuaryv1.AnnotationIPRetain: "true"}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team",
		Annotations: map[string]string{estuaryv1.AnnotationIPRetainTTL: "Never"}}}
	sel, _ := SelectionFor(pod, ns)
	fx, err := FixedFor(&sel, pod, ns)
	if err != nil {
		t.Fatal(err)
	}
	wantDenied(t, fx.CheckRetention(Bounds{}, &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "ov"}}, false),
		ann(estuaryv1.AnnotationIPRetainTTL)+` (inherited from namespace "team")`, "is Never")
}

func ann(key string) string { return "metadata.annotations[" + key + "]" }

// claimNetwork: network un with a public subnet whose .10-.19 are reserved
// (claimable from namespaces labelled tier=gold), and a private subnet
// claimable from namespace team only.
func claimNetwork() (*estuaryv1.Network, []estuaryv1.Subnet) {
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "un"}, Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay}}
	return n, []estuaryv1.Subnet{
		{ObjectMeta: metav1.ObjectMeta{Name: "pub", UID: "u-1", Generation: 1}, Spec: estuaryv1.SubnetSpec{Network: "un",
			ReservedNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
			Range: estuaryv1.AddressRange{Version: 4, CIDR: "192.168.1.0/24", Gateway: "192.168.1.1",
				ReservedIPs: []estuaryv1.AddressOrRange{"192.168.1.10-192.168.1.19"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "priv", UID: "u-1", Generation: 1}, Spec: estuaryv1.SubnetSpec{Network: "un", Private: true,
			NamespaceSelector: byName("team"), Range: estuaryv1.AddressRange{Version: 4, CIDR: "192.168.2.0/24"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "closed", UID: "u-1", Generation: 1}, Spec: estuaryv1.SubnetSpec{Network: "un",
			Range: estuaryv1.AddressRange{Version: 4, CIDR: "192.168.3.0/24", ReservedIPs: []estuaryv1.AddressOrRange{"192.168.3.5"}}}},
	}
}

func TestClaims(t *testing.T) {
	n, subnets := claimNetwork()
	nodes := NodeAddresses([]corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "192.168.1.50"}, {Type: corev1.NodeHostName, Address: "n1"},
		{Type: corev1.NodeExternalIP, Address: "192.168.1.51"}}}}})
	ip, pool := estuaryv1.AnnotationIPAddress, estuaryv1.AnnotationIPPool
	gold := map[string]string{"tier": "gold"}
	for _, c := range []struct {
		name   string
		ann    map[string]string
		labels map[string]string
		want   []string // nil: admitted
	}{
		{"an ordinary address", map[string]string{ip: "192.168.1.30"}, nil, nil},
		{"a reserved address from a selected namespace", map[string]string{ip: "192.168.1.12"}, gold, nil},
		{"a reserved address from another namespace", map[string]string{ip: "192.168.1.12"}, nil,
			[]string{ann(ip), `address 192.168.1.12 is reserved in subnet "pub" (spec.range.reservedIPs)`, `does not select namespace "team"`}},
		{"a reserved address of a subnet without a selector", map[string]string{pool: "192.168.1.30,192.168.3.5"}, gold,
			[]string{ann(pool), `entry 1: 192.168.3.5 is reserved in subnet "closed"`, "it is unset or invalid, so no namespace may"}},
		{"a node's InternalIP", map[string]string{ip: "192.168.1.50"}, gold,
			[]string{ann(ip), `address 192.168.1.50 is the InternalIP of node "n1"`}},
		{"a node's ExternalIP in a pool", map[string]string{pool: "192.168.1.30,192.168.1.51"}, nil,
			[]string{ann(pool), `entry 1: 192.168.1.51 is the ExternalIP of node "n1"`}},
		{"a private subnet's address from the selected namespace", map[string]string{ip: "192.168.2.7"}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx, _ := fixedOf(t, c.ann, c.labels)
			places, err := fx.CheckAddresses(n, subnets, Claims{Nodes: nodes, Layouts: NewLayouts()})
			if c.want == nil {
				if err != nil || len(places) == 0 {
					t.Fatalf("denied: %v (places %v)", err, places)
				}
				return
			}
			wantDenied(t, err, c.want...)
		})
	}
	t.Run("a private subnet's address from another namespace", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "intruder", Name: "p", Annotations: map[string]string{ip: "192.168.2.7"}}}
		sel, _ := SelectionFor(pod, nil)
		fx, _ := FixedFor(&sel, pod, nil)
		_, err := fx.CheckAddresses(n, subnets, Claims{})
		wantDenied(t, err, `pod "intruder/p"`, `address 192.168.2.7 lies in private subnet "priv", whose spec.namespaceSelector does not select namespace "intruder"`)
	})
}

// Naming a private subnet needs its namespaceSelector to select the pod's
// namespace; unset, every namespace may.
func TestResolveNetworkPrivateSubnet(t *testing.T) {
	n, subnets := claimNetwork()
	open := estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "open"}, Spec: estuaryv1.SubnetSpec{Network: "un", Private: true,
		Range: estuaryv1.AddressRange{Version: 4, CIDR: "192.168.4.0/24"}}}
	subnets = append(subnets, open)
	for _, c := range []struct {
		ns, subnet string
		want       string
	}{
		{"team", "priv", ""},
		{"team", "open", ""},
		{"other", "open", ""},
		{"other", "pub", ""},
		{"other", "priv", `metadata.annotations[networking.estuary.io/subnet] names private subnet "priv", whose spec.namespaceSelector does not select namespace "other"`},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "p", Annotations: map[string]string{estuaryv1.AnnotationSubnet: c.subnet}}}
		err := ValidatePod(pod, nil, []estuaryv1.Network{*n}, subnets)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s naming %s: %v", c.ns, c.subnet, err)
		case c.want != "":
			wantDenied(t, err, c.want)
		}
	}
}

func TestPoolCap(t *testing.T) {
	entries := make([]string, MaxPoolEntries+1)
	macs := make([]string, MaxPoolEntries+1)
	for i := range entries {
		entries[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String()
		macs[i] = fmt.Sprintf("0a:00:00:00:%02x:%02x", i>>8, i&0xff)
	}
	for key, list := range map[string][]string{estuaryv1.AnnotationIPPool: entries, estuaryv1.AnnotationMACPool: macs} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"}}
		pod.Annotations = map[string]string{key: strings.Join(list[:MaxPoolEntries], ",")}
		sel, _ := SelectionFor(pod, nil)
		if _, err := FixedFor(&sel, pod, nil); err != nil {
			t.Errorf("%s of %d entries: %v", key, MaxPoolEntries, err)
		}
		pod.Annotations[key] = strings.Join(list, ",")
		_, err := FixedFor(&sel, pod, nil)
		wantDenied(t, err, ann(key), fmt.Sprintf("has %d entries; a pool may have at most %d", MaxPoolEntries+1, MaxPoolEntries))
	}
}

// The cache parses a subnet again only when its spec changes (its
// generation), not its status, and forgets deleted subnets.
func TestLayoutsCache(t *testing.T) {
	_, subnets := claimNetwork()
	c := NewLayouts()
	c.index("un", nil, subnets)
	first := c.byName["pub"]
	c.index("un", nil, subnets)
	if c.byName["pub"] != first {
		t.Fatal("an unchanged subnet was parsed again")
	}
	subnets[0].ResourceVersion = "2"
	c.index("un", nil, subnets)
	if c.byName["pub"] != first {
		t.Fatal("a subnet whose status changed was parsed again")
	}
	subnets[0].Generation = 2
	subnets[0].Spec.Range.ReservedIPs = nil
	ix := c.index("un", nil, subnets)
	if c.byName["pub"] == first || c.byName["pub"].version.generation != 2 {
		t.Fatal("a changed subnet kept its old layout")
	}
	var seen []string
	ix.holding(netip.MustParseAddr("192.168.1.12"), func(l *layout) bool { seen = append(seen, l.name); return true })
	if len(seen) != 1 || seen[0] != "pub" || c.byName["pub"].check.Reserved(netip.MustParseAddr("192.168.1.12")) {
		t.Fatalf("192.168.1.12 is held by %v (reserved %v); want pub, no longer reserved", seen, c.byName["pub"].check.Reserved(netip.MustParseAddr("192.168.1.12")))
	}
	c.index("un", nil, subnets[:1])
	if len(c.byName) != 1 {
		t.Fatalf("cache holds %d layouts after two subnets went, want 1", len(c.byName))
	}
}
