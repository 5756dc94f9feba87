package webhook

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// Namespaces of the tenancy tests: gold may name reserved addresses of ov4
// and take the private subnet's; keep may keep addresses for Never; long
// asks for a retention above the maximum by default.
const (
	nsGold = "tenancy-gold"
	nsKeep = "tenancy-keep"
	nsLong = "tenancy-long"
)

func byName(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

// tenancyFixture: the Overlay network ov, which lets namespace keep keep
// addresses for Never; its subnet ov4, whose reserved 10.0.0.10-10.0.0.19
// namespaces labelled tier=gold may name; ov4c, whose reserved 10.1.0.5
// nobody may name; the private ov4p, for namespace gold only; ov6; and a
// node whose InternalIP is 10.0.0.200.
func tenancyFixture() []client.Object {
	ov := overlayNet("ov")
	ov.Spec.Retention = &estuaryv1.NetworkRetention{NeverNamespaceSelector: byName(nsKeep)}
	ov4 := subnetObj("ov4", "ov", "10.0.0.0/16", func(s *estuaryv1.Subnet) {
		s.Spec.Range.ReservedIPs = []estuaryv1.AddressOrRange{"10.0.0.10-10.0.0.19"}
		s.Spec.ReservedNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	})
	ov4c := subnetObj("ov4c", "ov", "10.1.0.0/16", func(s *estuaryv1.Subnet) {
		s.Spec.Range.ReservedIPs = []estuaryv1.AddressOrRange{"10.1.0.5"}
	})
	ov4p := subnetObj("ov4p", "ov", "10.3.0.0/16", private(), func(s *estuaryv1.Subnet) { s.Spec.NamespaceSelector = byName(nsGold) })
	node := nodeObj("tenancy-node", nil)
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.200"}, {Type: corev1.NodeHostName, Address: "tenancy-node"}}
	return []client.Object{ov, ov4, ov4c, ov4p, subnetObj("ov6", "ov", "fd00::/64"), node}
}

// tenancyNamespaces creates the tenancy tests' namespaces once: a deleted
// namespace stays Terminating here (no controller finishes it), so they
// are shared by the tests and never deleted.
func tenancyNamespaces(t *testing.T) {
	t.Helper()
	gold := nsObj(nsGold, nil)
	gold.Labels = map[string]string{"tier": "gold"}
	for _, ns := range []*corev1.Namespace{gold, nsObj(nsKeep, nil), nsObj(nsLong, sel(estuaryv1.AnnotationIPRetainTTL, "200h"))} {
		if err := k8s.Create(ctx(t), ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", ns.Name, err)
		}
		if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(ns), ns); err != nil {
			t.Fatal(err)
		}
		waitCached(t, ns)
	}
}

func TestTenancyDenials(t *testing.T) {
	tenancyNamespaces(t)
	seed(t, tenancyFixture()...)
	runDenials(t, tenancyDenials())
}

func tenancyDenials() []denial {
	pod := func(a map[string]string, opts ...podOpt) client.Object { return podObj("default", "p", a, opts...) }
	ret, ttl := estuaryv1.AnnotationIPRetain, estuaryv1.AnnotationIPRetainTTL
	ip, pool, macs := estuaryv1.AnnotationIPAddress, estuaryv1.AnnotationIPPool, estuaryv1.AnnotationMACPool
	return []denial{
		{name: "ip-retain-ttl over the maximum", create: pod(sel(ret, "true", ttl, "999999h")),
			want: []string{`pod "default/p"`, ann(ttl), `"999999h" is longer than the cluster's maximum retention 168h0m0s`, "--max-retain-ttl"}},
		{name: "a namespace's ip-retain-ttl over the maximum", create: podObj(nsLong, "p", sel(ret, "true")),
			want: []string{`pod "` + nsLong + `/p"`, ann(ttl) + ` (inherited from namespace "` + nsLong + `")`, `"200h" is longer`}},
		{name: "a StatefulSet's ip-retain-ttl over the maximum", create: podObj("default", "db-0", sel(ttl, "200h"), ownedBy("db")),
			want: []string{`pod "default/db-0"`, ann(ttl), `"200h" is longer`}},
		{name: "Never where the network does not allow it", create: pod(sel(ret, "true", ttl, estuaryv1.RetainNever)),
			want: []string{`pod "default/p"`, ann(ttl), `is Never, which network "ov" allows only to pods of the namespaces its spec.retention.neverNamespaceSelector selects`,
				`it does not select namespace "default"`}},
		{name: "a reserved address from a namespace not selected", create: pod(sel(ip, "10.0.0.12")),
			want: []string{`pod "default/p"`, ann(ip), `address 10.0.0.12 is reserved in subnet "ov4" (spec.range.reservedIPs)`, `does not select namespace "default"`}},
		{name: "a reserved address nobody may name", create: podObj(nsGold, "p", sel(pool, "10.0.0.30,10.1.0.5")),
			want: []string{`pod "` + nsGold + `/p"`, ann(pool), `entry 1: 10.1.0.5 is reserved in subnet "ov4c"`, "no namespace may"}},
		{name: "a private subnet's address from another namespace", create: pod(sel(ip, "10.3.0.7")),
			want: []string{`pod "default/p"`, ann(ip), `address 10.3.0.7 lies in private subnet "ov4p", whose spec.namespaceSelector does not select namespace "default"`}},
		{name: "a private subnet named from another namespace", create: pod(sel(annSub, "ov4p")),
			want: []string{`pod "default/p"`, ann(annSub), `names private subnet "ov4p", whose spec.namespaceSelector does not select namespace "default"`}},
		{name: "a node's address", create: podObj(nsGold, "p", sel(ip, "10.0.0.200")),
			want: []string{`pod "` + nsGold + `/p"`, ann(ip), `address 10.0.0.200 is the InternalIP of node "tenancy-node"`, "never given to a pod"}},
		{name: "ip-pool over the cap", create: pod(sel(pool, poolOf(netmodel.MaxPoolEntries+1, "10.0.%d.%d"))),
			want: []string{`pod "default/p"`, ann(pool), fmt.Sprintf("has %d entries; a pool may have at most %d", netmodel.MaxPoolEntries+1, netmodel.MaxPoolEntries)}},
		{name: "mac-pool over the cap", create: pod(sel(macs, poolOf(netmodel.MaxPoolEntries+1, "0a:00:00:00:%02x:%02x"))),
			want: []string{`pod "default/p"`, ann(macs), fmt.Sprintf("has %d entries; a pool may have at most %d", netmodel.MaxPoolEntries+1, netmodel.MaxPoolEntries)}},
		{name: "a subnet's reserved selector that does not parse",
			create: subnetObj("ov4x", "ov", "10.4.0.0/16", func(s *estuaryv1.Subnet) {
				s.Spec.ReservedNamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
			}),
			want: []string{`subnet "ov4x"`, "spec.reservedNamespaceSelector is not a valid label selector", `"Near"`}},
		{name: "a namespace selector on a public subnet", schema: true,
			create: subnetObj("ov4y", "ov", "10.5.0.0/16", func(s *estuaryv1.Subnet) { s.Spec.NamespaceSelector = byName(nsGold) }),
			want:   []string{"spec.namespaceSelector", "only allowed on a private subnet"}},
	}
}

// poolOf is a pool of n entries, each format filled with its index's two
// bytes.
func poolOf(n int, format string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(format, 1+i>>8, i&0xff)
	}
	return strings.Join(items, ",")
}

// What the bounds allow is admitted: the maximum itself, Never where the
// network allows it and on a StatefulSet's pod, reserved and private
// addresses from the namespaces their subnets select, a pool of the cap.
func TestTenancyAdmitted(t *testing.T) {
	tenancyNamespaces(t)
	seed(t, tenancyFixture()...)
	ret, ttl := estuaryv1.AnnotationIPRetain, estuaryv1.AnnotationIPRetainTTL
	create(t,
		podObj("default", "max", sel(ret, "true", ttl, "168h")),
		podObj(nsKeep, "forever", sel(ret, "true", ttl, estuaryv1.RetainNever)),
		podObj("default", "db-0", sel(ttl, estuaryv1.RetainNever), ownedBy("db")),
		podObj(nsLong, "not-kept", nil),
		podObj(nsGold, "reserved", sel(estuaryv1.AnnotationIPAddress, "10.0.0.12")),
		podObj(nsGold, "private", sel(estuaryv1.AnnotationIPAddress, "10.3.0.7")),
		podObj(nsGold, "named-private", sel(annSub, "ov4p")),
		podObj("default", "pool", sel(estuaryv1.AnnotationIPPool, poolOf(netmodel.MaxPoolEntries, "10.0.%d.%d"))),
	)
}

// A Network whose retention selector does not parse is denied.
func TestNetworkRetentionSelectorDenied(t *testing.T) {
	n := overlayNet("ovx")
	n.Spec.Retention = &estuaryv1.NetworkRetention{NeverNamespaceSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpExists, Values: []string{"v"}}}}}
	runDenials(t, []denial{{name: "retention selector", create: n,
		want: []string{`network "ovx"`, "spec.retention.neverNamespaceSelector is not a valid label selector"}}})
}
