package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/webhook"
	"github.com/estuary-cni/estuary/pkg/family"
)

// defaultsLabel marks the namespaces whose pods the server of
// startDefaultsServer admits instead of the suite's.
const defaultsLabel = "estuary-test/defaults"

// skipDefaults makes a namespace selector skip namespaces labelled
// defaultsLabel.
func skipDefaults(s *metav1.LabelSelector) {
	if s != nil {
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: defaultsLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
	}
}

// byTypeFixture: three VLAN networks, ua over rack a (IPv4), ub over rack b
// (IPv4 and IPv6) and uc over rack c for namespace "elsewhere" only.
func byTypeFixture() []client.Object {
	uc := underlayNet("uc", vlan, sel("rack", "c"))
	uc.Spec.Namespaces = []string{"elsewhere"}
	return []client.Object{
		underlayNet("ua", vlan, sel("rack", "a")), underlayNet("ub", vlan, sel("rack", "b")), uc,
		subnetObj("ua4", "ua", "10.31.0.0/24", gw("10.31.0.1")), subnetObj("ub4", "ub", "10.32.0.0/24", gw("10.32.0.1")),
		subnetObj("ub6", "ub", "fd00:32::/64", gw("fd00:32::1")), subnetObj("uc4", "uc", "10.33.0.0/24", gw("10.33.0.1")),
	}
}

var (
	roomA4 = term(in("rack", "a"), notFull("ua", family.IPv4))
	roomB4 = term(in("rack", "b"), notFull("ub", family.IPv4))
	roomB  = term(in("rack", "b"), notFull("ub", family.IPv4), notFull("ub", family.IPv6))
)

// A pod asking for Underlay by type (no defaults) may run on a node of any
// Underlay domain its namespace may use with room for the families it
// takes from that network; a StatefulSet's pod holding addresses is pinned
// to their network's domain.
func TestUnderlayByTypeMutation(t *testing.T) {
	seed(t, byTypeFixture()...)
	seed(t, keptFor(instance("default", "db-0-ip", "ub", "ub4", "10.32.0.5/24"), "db"))
	byType := sel(annType, "Underlay")
	cases := []struct {
		name string
		pod  *corev1.Pod
		want *corev1.Affinity
	}{
		{"each network's own families", podObj("default", "any", byType), required(roomA4, roomB)},
		{"ip-family IPv6: only the network that has it", podObj("default", "v6", sel(annType, "Underlay", annFam, "IPv6")),
			required(term(in("rack", "b"), notFull("ub", family.IPv6)))},
		{"own terms crossed with the alternatives", podObj("default", "own", byType, withAffinity(required(term(in("disk", "ssd"))))),
			required(term(in("disk", "ssd"), in("rack", "a"), notFull("ua", family.IPv4)), term(in("disk", "ssd"), in("rack", "b"), notFull("ub", family.IPv4), notFull("ub", family.IPv6)))},
		{"bound to a node: domains only", podObj("default", "bound", byType, boundTo("n1")), required(term(in("rack", "a")), term(in("rack", "b")))},
		{"StatefulSet pod holding addresses: their domain", podObj("default", "db-0", byType, ownedBy("db")), required(term(in("rack", "b")))},
		{"named network wins", podObj("default", "named", sel(annType, "Underlay", annNet, "ua")), required(roomA4)},
		{"a namespace uc allows gets uc's domain too", podObj("elsewhere", "there", byType),
			required(roomA4, roomB, term(in("rack", "c"), notFull("uc", family.IPv4)))},
	}
	seed(t, nsObj("elsewhere", nil))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			create(t, c.pod)
			requireAffinity(t, c.pod, c.want)
		})
	}
	create(t, podObj("default", "fits", byType))
	got := getPod(t, "default", "fits")
	for _, c := range []struct {
		labels map[string]string
		fits   bool
	}{
		{sel("rack", "a"), true},
		{sel("rack", "b", netmodel.AvailableKey("ub", family.IPv6), netmodel.ValueFalse), false},
		{sel("rack", "b", netmodel.AvailableKey("ub", family.IPv4), netmodel.ValueTrue, netmodel.AvailableKey("ub", family.IPv6), netmodel.ValueTrue), true},
		{sel("rack", "c"), false},
		{sel("rack", "z"), false},
	} {
		if fits := fitsRequired(t, got, c.labels); fits != c.fits {
			t.Errorf("node labels %v: pod fits %v, want %v", c.labels, fits, c.fits)
		}
	}
}

// Pods asking by type that cannot be served are denied naming why: fixed
// addresses without a network, no Underlay network allowing the namespace.
func TestUnderlayByTypeDenials(t *testing.T) {
	uc := underlayNet("uc", vlan, sel("rack", "c"))
	uc.Spec.Namespaces = []string{"elsewhere-denied"}
	seed(t, uc, subnetObj("uc4", "uc", "10.33.0.0/24", gw("10.33.0.1")), nsObj("elsewhere-denied", nil))
	runDenials(t, []denial{
		{name: "fixed address by type", create: podObj("elsewhere-denied", "p", sel(annType, "Underlay", estuaryv1.AnnotationIPAddress, "10.33.0.9")),
			want: []string{`pod "elsewhere-denied/p"`, ann(annNet), "is not set", "by type", estuaryv1.AnnotationIPAddress}},
		{name: "by type in a namespace no Underlay network allows", create: podObj("default", "p", sel(annType, "Underlay")),
			want: []string{`pod "default/p"`, ann(annType), "is Underlay", `allows namespace "default"`}},
	})
}

// With --default-network-type=Underlay and --default-ip-family=IPv4, a pod
// that says nothing is scheduled by type for IPv4 only; a pod's own type,
// family or network wins; a default family a named network cannot serve
// is denied naming the network, the family and the flag.
func TestClusterDefaults(t *testing.T) {
	startDefaultsServer(t, netmodel.Defaults{NetworkType: estuaryv1.NetworkTypeUnderlay, IPFamily: estuaryv1.IPFamilyIPv4})
	seed(t, byTypeFixture()...)
	seed(t, overlayNet("dov"), subnetObj("dov6", "dov", "fd00:77::/64"))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "with-defaults", Labels: map[string]string{defaultsLabel: "on"}}}
	seed(t, ns)
	waitDefaultsServed(t, ns.Name)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want *corev1.Affinity
	}{
		{"nothing said: Underlay by type, IPv4", podObj(ns.Name, "plain", nil), required(roomA4, roomB4)},
		{"pod's DualStack wins over the default family", podObj(ns.Name, "dual", sel(annFam, "DualStack")), required(roomB)},
		{"named network wins over the default type", podObj(ns.Name, "named", sel(annNet, "ub")), required(roomB4)},
		{"pod's Overlay wins over the default type", podObj(ns.Name, "overlay", sel(annType, "Overlay", annFam, "IPv6")),
			required(term(notFull("dov", family.IPv6)))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			create(t, c.pod)
			requireAffinity(t, c.pod, c.want)
		})
	}
	runDenials(t, []denial{
		{name: "default family the named network lacks", create: podObj(ns.Name, "nofam", sel(annNet, "dov")),
			want: []string{`pod "with-defaults/nofam"`, ann(annFam), "is not set", "default IP family IPv4", "--default-ip-family", `network "dov" has no public IPv4 subnet`}},
		{name: "pod's Overlay, default family the overlay lacks", create: podObj(ns.Name, "ov4", sel(annType, "Overlay")),
			want: []string{`pod "with-defaults/ov4"`, "default IP family IPv4", `network "dov"`}},
	})
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	if err := k8s.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
		t.Fatalf("get pod: %v", err)
	}
	return got
}

func requireAffinity(t *testing.T, p *corev1.Pod, want *corev1.Affinity) {
	t.Helper()
	got := getPod(t, p.Namespace, p.Name)
	if !equality.Semantic.DeepEqual(got.Spec.Affinity, want) {
		t.Errorf("affinity =\n%s\nwant\n%s", affinityString(got.Spec.Affinity), affinityString(want))
	}
}

// startDefaultsServer runs a second webhook server, with cluster defaults
// d, on envtest's serving certificate, and points pod webhook
// configurations of its own at it for namespaces labelled defaultsLabel.
func startDefaultsServer(t *testing.T, d netmodel.Defaults) {
	t.Helper()
	port := freePort(t)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{Host: installed.LocalServingHost, Port: port, CertDir: installed.LocalServingCertDir}),
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := webhook.Setup(context.Background(), mgr, webhook.Options{Defaults: d}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(runCtx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	started := mgr.GetWebhookServer().StartedChecker()
	if err := wait.PollUntilContextTimeout(ctx(t), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return started(&http.Request{}) == nil, nil
	}); err != nil {
		t.Fatalf("defaults webhook server did not start: %v", err)
	}
	for _, l := range []client.ObjectList{&estuaryv1.NetworkList{}, &estuaryv1.SubnetList{}, &estuaryv1.IPInstanceList{}} {
		if err := mgr.GetClient().List(ctx(t), l); err != nil {
			t.Fatalf("warm cache: %v", err)
		}
	}
	validating, mutating := defaultsConfigurations(net.JoinHostPort(installed.LocalServingHost, strconv.Itoa(port)))
	seed(t, validating, mutating)
}

// defaultsConfigurations are the pod webhooks of webhook.Configurations,
// named estuary-defaults-test, calling https://hostPort with envtest's CA,
// for namespaces labelled defaultsLabel only.
func defaultsConfigurations(hostPort string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	validating, mutating := webhook.Configurations(webhook.Service{Namespace: "estuary-system", Name: "estuary-webhook", Port: 443})
	only := &metav1.LabelSelector{MatchLabels: map[string]string{defaultsLabel: "on"}}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		u := "https://" + hostPort + *cc.Service.Path
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: installed.LocalServingCAData}
	}
	var pods []admissionregistrationv1.ValidatingWebhook
	for _, w := range validating.Webhooks {
		if w.Rules[0].Resources[0] == "pods" {
			point(&w.ClientConfig)
			w.NamespaceSelector = only
			pods = append(pods, w)
		}
	}
	validating.Webhooks, validating.Name = pods, "estuary-defaults-test"
	for i := range mutating.Webhooks {
		point(&mutating.Webhooks[i].ClientConfig)
		mutating.Webhooks[i].NamespaceSelector = only
	}
	mutating.Name = "estuary-defaults-test"
	return validating, mutating
}

// waitDefaultsServed waits until the API server calls the defaults server
// for namespace ns: a pod naming a fixed address and nothing else asks for
// Underlay by type under its defaults, which it denies (and nothing else
// does).
func waitDefaultsServed(t *testing.T, ns string) {
	t.Helper()
	probe := podObj(ns, "probe", sel(estuaryv1.AnnotationIPAddress, "10.31.0.9"))
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 20*time.Second, true, func(c context.Context) (bool, error) {
		p := probe.DeepCopy()
		err := k8s.Create(c, p)
		if err == nil {
			_ = k8s.Delete(c, p, client.GracePeriodSeconds(0))
			return false, nil
		}
		return strings.Contains(err.Error(), "by type"), nil
	})
	if err != nil {
		t.Fatal(errors.Join(fmt.Errorf("the defaults webhook does not serve namespace %s", ns), err))
	}
}
