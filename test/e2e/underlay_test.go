//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

// The untagged VLAN underlay network the tests create: the lab's underlay
// pod subnet on the switch, whose gateway is the router.
const (
	underlayNetwork = "rack1"
	underlaySubnet  = "rack1-v4"
	rackLabel       = "rack"
	rackValue       = "rack1"
)

var underlayNodes = []string{"node-1", "node-2"}

// labelNodes sets label key=value on nodes and removes it when the test ends.
func (e *labEnv) labelNodes(t *testing.T, key, value string, nodes ...string) {
	t.Helper()
	set := func(ctx context.Context, node string, v any) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, v)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
		return e.c.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	for _, node := range nodes {
		t.Cleanup(func() {
			if err := set(context.Background(), node, "null"); err != nil {
				t.Errorf("remove label %s from %s: %v", key, node, err)
			}
		})
		if err := set(testCtx(t, time.Minute), node, fmt.Sprintf("%q", value)); err != nil {
			t.Fatalf("label %s %s=%s: %v", node, key, value, err)
		}
	}
	e.waitKubeletsAdmit(t, map[string]string{key: value}, nodes)
}

// waitKubeletsAdmit waits until the kubelet of each node admits a pod whose
// node selector is sel. A kubelet checks a bound pod's node selector and
// affinity against its own copy of its node, which can be older than the
// label; a pod it sees first is failed for good (reason NodeAffinity). The
// probe is a host-network pause pod, made again while it is refused.
func (e *labEnv) waitKubeletsAdmit(t *testing.T, sel map[string]string, nodes []string) {
	t.Helper()
	probes := map[string]*corev1.Pod{}
	remove := func(p *corev1.Pod) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete probe pod %s: %v", p.Name, err)
		}
	}
	defer func() {
		for _, p := range probes {
			remove(p)
		}
	}()
	eventually(t, fmt.Sprintf("the kubelets of %v admit a pod that needs %v", nodes, sel), 2*time.Minute, func(ctx context.Context) error {
		for _, node := range nodes {
			if err := e.probeAdmits(ctx, probes, node, sel, remove); err != nil {
				return err
			}
		}
		return nil
	})
}

// probeAdmits returns nil once node's probe pod runs; it makes the probe,
// or makes it again after the kubelet failed it.
func (e *labEnv) probeAdmits(ctx context.Context, probes map[string]*corev1.Pod, node string, sel map[string]string, remove func(*corev1.Pod)) error {
	p := probes[node]
	if p == nil {
		p = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "label-probe-", Namespace: metav1.NamespaceDefault},
			Spec:       podTemplate(node, pauseContainer()),
		}
		p.Spec.HostNetwork = true
		p.Spec.NodeSelector = sel
		if err := e.c.Create(ctx, p); err != nil {
			return fmt.Errorf("create probe pod on %s: %w", node, err)
		}
		probes[node] = p
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		return err
	}
	switch p.Status.Phase {
	case corev1.PodRunning:
		return nil
	case corev1.PodFailed:
		remove(p)
		delete(probes, node)
		return fmt.Errorf("kubelet of %s refused %s: %s: %s", node, p.Name, p.Status.Reason, p.Status.Message)
	}
	return errors.New(describePod(p))
}

// createUnderlay creates the Underlay network (mode VLAN, netID 0, domain
// rack=rack1) and its IPv4 subnet, and deletes both, waiting until they are
// gone, when the test ends. It returns the subnet.
func (e *labEnv) createUnderlay(t *testing.T) *estuaryv1.Subnet {
	t.Helper()
	return e.createUnderlayRange(t, 10, 200)
}

// createUnderlayRange is createUnderlay with a subnet whose pods get the
// subnet's first..last addresses.
func (e *labEnv) createUnderlayRange(t *testing.T, first, last int) *estuaryv1.Subnet {
	t.Helper()
	prefix := netip.MustParsePrefix(lab.UnderlayCIDR)
	gw := prefix.Addr().Next()
	nw := &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: underlayNetwork},
		Spec: estuaryv1.NetworkSpec{
			Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0),
			NodeSelector: map[string]string{rackLabel: rackValue},
		},
	}
	sn := &estuaryv1.Subnet{
		ObjectMeta: metav1.ObjectMeta{Name: underlaySubnet},
		Spec: estuaryv1.SubnetSpec{Network: underlayNetwork, Range: estuaryv1.AddressRange{
			Version: 4, CIDR: prefix.String(), Gateway: estuaryv1.IPAddress(gw.String()),
			Start: estuaryv1.IPAddress(nthAddr(prefix, first).String()), End: estuaryv1.IPAddress(nthAddr(prefix, last).String()),
		}},
	}
	e.createNetwork(t, nw, sn)
	return sn
}

// createNetwork creates nw and its subnet sn, and deletes both, waiting
// until they are gone, when the test ends.
func (e *labEnv) createNetwork(t *testing.T, nw *estuaryv1.Network, sn *estuaryv1.Subnet) {
	t.Helper()
	for _, o := range []client.Object{nw, sn} {
		t.Cleanup(func() { e.deleteAndWait(t, o) })
		if err := e.c.Create(testCtx(t, time.Minute), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// deleteAndWait deletes a cluster-scoped object and waits until it is gone.
func (e *labEnv) deleteAndWait(t *testing.T, o client.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %T %s: %v", o, o.GetName(), err)
		return
	}
	err := waitFor(fmt.Sprintf("%T %s deleted", o, o.GetName()), 2*time.Minute, func(ctx context.Context) error {
		err := e.c.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there, finalizers %v", o.GetFinalizers())
	})
	if err != nil {
		t.Error(err)
	}
}

// underlayPod is a netexec pod of network rack1, bound to node when one is
// given. It carries no node selector: the admission webhook adds the
// network's domain to its node affinity.
func underlayPod(name, node string) *corev1.Pod {
	p := netexecPod(name, node, nil)
	p.Annotations = map[string]string{estuaryv1.AnnotationNetwork: underlayNetwork}
	return p
}

// requiresDomain reports whether every term of p's required node affinity
// asks for label key=value, as the webhook adds for a network's domain.
func requiresDomain(p *corev1.Pod, key, value string) bool {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		if !slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == key && r.Operator == corev1.NodeSelectorOpIn && slices.Equal(r.Values, []string{value})
		}) {
			return false
		}
	}
	return len(terms) > 0
}

// TestUnderlayUntaggedVLAN: pods of an Underlay network (mode VLAN, netID 0)
// whose domain is node-1 and node-2 sit on the lab's switch with addresses of
// the router's subnet 10.77.100.0/24: the external host and the pod reach each
// other with their own addresses, underlay and overlay pods reach each other
// with their own addresses, and a pod of the network bound to node-3 gets no
// address.
func TestUnderlayUntaggedVLAN(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	sn := e.createUnderlay(t)
	cidr := netip.MustParsePrefix(sn.Spec.Range.CIDR)
	ns := e.newNamespace(t, "underlay")

	e.mustCreate(t, ns, underlayPod("under", ""), netexecPod("over", "node-3", map[string]string{"app": "over"}), underlayPod("outside", "node-3"))
	pods := e.waitPods(t, ns, "under", "over")
	under, over := pods["under"], pods["over"]
	underNS, overNS := e.podNetns(t, &under), e.podNetns(t, &over)
	underIP := under.Status.PodIP

	t.Run("pod address in the underlay subnet on a domain node", func(t *testing.T) {
		a, err := netip.ParseAddr(underIP)
		if err != nil || !cidr.Contains(a) {
			t.Errorf("pod %s has address %q, want one in %s", under.Name, underIP, cidr)
		}
		if !slices.Contains(underlayNodes, under.Spec.NodeName) {
			t.Errorf("pod %s runs on %q, want one of %v", under.Name, under.Spec.NodeName, underlayNodes)
		}
		if !requiresDomain(&under, rackLabel, rackValue) {
			t.Errorf("pod %s: the webhook did not require the domain %s=%s: affinity %+v", under.Name, rackLabel, rackValue, under.Spec.Affinity)
		}
		ipi, err := e.podInstance(testCtx(t, time.Minute), ns, under.Name)
		if err != nil {
			t.Fatal(err)
		}
		if ipi.Spec.Subnet != underlaySubnet || instanceAddr(ipi) != underIP {
			t.Errorf("IPInstance %s: subnet %q address %s, want %s %s", ipi.Name, ipi.Spec.Subnet, instanceAddr(ipi), underlaySubnet, underIP)
		}
	})

	t.Run("external host and pod reach each other without NAT", func(t *testing.T) {
		u := fmt.Sprintf("http://%s:%d/clientip", underIP, httpPort)
		var seen string
		eventually(t, "external -> "+u, reachTimeout, func(ctx context.Context) error {
			var err error
			seen, err = httpGet(ctx, e.externalNetns, u)
			return err
		})
		if hostOf(seen) != e.externalAddr {
			t.Errorf("pod %s saw the external host as %s, want %s", under.Name, seen, e.externalAddr)
		}
		serveClientIP(t, e.externalNetns, fmt.Sprintf("%s:%d", e.externalAddr, externalPort))
		eventually(t, fmt.Sprintf("pod %s -> external %s:%d", under.Name, e.externalAddr, externalPort), reachTimeout, func(ctx context.Context) error {
			var err error
			seen, err = dialFrom(ctx, underNS, "http", "clientip", e.externalAddr, externalPort)
			return err
		})
		if hostOf(seen) != underIP {
			t.Errorf("the external host saw pod %s as %s, want its own address %s (underlay subnets are not NATed)", under.Name, seen, underIP)
		}
	})

	t.Run("underlay pod has the uplink's MTU, overlay pod the tunnel's", func(t *testing.T) {
		uplink := linkMTU(t, e.nodeNetns[under.Spec.NodeName], "eth0")
		if got := linkMTU(t, underNS, "eth0"); got != uplink {
			t.Errorf("pod %s: eth0 mtu %d, want the uplink's %d", under.Name, got, uplink)
		}
		if got, want := linkMTU(t, overNS, "eth0"), uplink-50; got != want {
			t.Errorf("pod %s: eth0 mtu %d, want the tunnel's %d", over.Name, got, want)
		}
	})

	t.Run("underlay pod reaches every node", func(t *testing.T) {
		for _, n := range e.nodes {
			checkPing(t, fmt.Sprintf("%s -> %s", under.Name, n), underNS, e.nodeAddr[n], 3)
		}
	})

	t.Run("underlay pod to overlay pod", func(t *testing.T) {
		checkClientIP(t, underNS, &under, &over)
	})

	t.Run("overlay pod to underlay pod through the tunnel, not the router", func(t *testing.T) {
		dropped := e.routerDropsFrom(t, lab.PodCIDR)
		checkClientIP(t, overNS, &over, &under)
		checkClientIP(t, underNS, &under, &over)
		if n := dropped(); n != 0 {
			t.Errorf("the router saw %d packets from the overlay %s: overlay-underlay traffic left the tunnel", n, lab.PodCIDR)
		}
	})

	t.Run("pod bound to a node outside the domain gets no address", func(t *testing.T) {
		e.checkOutsideDomain(t, ns, "outside", "node-3")
	})

	t.Run("ClusterIP service backed by an overlay pod", func(t *testing.T) {
		e.checkServiceFromUnderlay(t, ns, underNS, &under)
	})
}

// linkMTU is the MTU of link in the network namespace at nsPath.
func linkMTU(t *testing.T, nsPath, link string) int {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+nsPath, "ip", "-j", "link", "show", link).Output()
	if err != nil {
		t.Fatalf("ip link show %s in %s: %v", link, nsPath, err)
	}
	var links []struct {
		MTU int `json:"mtu"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip link show %s in %s: %q: %v", link, nsPath, out, err)
	}
	return links[0].MTU
}

// routerDropsFrom makes the router drop every packet from cidr it would
// forward, until the test ends, and returns a reader of how many it
// dropped: traffic that must not depend on the physical network routing
// cidr passes only if it never reaches the router.
func (e *labEnv) routerDropsFrom(t *testing.T, cidr string) func() int {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	rules := fmt.Sprintf("table ip estuary_e2e {\n chain forward {\n  type filter hook forward priority -10; policy accept;\n"+
		"  ip saddr %s counter drop\n }\n}\n", cidr)
	if _, err := e.exec(ctx, "router", nil, rules, "nft", "-f", "-"); err != nil {
		t.Fatalf("router: drop packets from %s: %v", cidr, err)
	}
	t.Cleanup(func() { _, _ = e.run(context.Background(), "router", "nft", "delete", "table", "ip", "estuary_e2e") })
	return func() int {
		out, err := e.run(testCtx(t, time.Minute), "router", "nft", "-j", "list", "table", "ip", "estuary_e2e")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Nftables []struct {
				Rule *struct {
					Expr []struct {
						Counter *struct{ Packets int } `json:"counter"`
					} `json:"expr"`
				} `json:"rule"`
			} `json:"nftables"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("parse the router's nft table: %v", err)
		}
		for _, o := range doc.Nftables {
			if o.Rule == nil {
				continue
			}
			for _, x := range o.Rule.Expr {
				if x.Counter != nil {
					return x.Counter.Packets
				}
			}
		}
		t.Fatalf("no counter in the router's nft table: %s", out)
		return 0
	}
}

// checkServiceFromUnderlay: a ClusterIP Service whose endpoint is the overlay
// pod "over" answers the underlay pod.
func (e *labEnv) checkServiceFromUnderlay(t *testing.T, ns, underNS string, under *corev1.Pod) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "over"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "over"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(httpPort)},
		}},
	}
	if err := e.c.Create(testCtx(t, time.Minute), svc); err != nil {
		t.Fatalf("create service over: %v", err)
	}
	var got string
	eventually(t, fmt.Sprintf("pod %s -> service %s:80", under.Name, svc.Spec.ClusterIP), reachTimeout,
		func(ctx context.Context) error {
			var err error
			got, err = dialFrom(ctx, underNS, "http", "hostname", svc.Spec.ClusterIP, 80)
			return err
		})
	if got != "over" {
		t.Errorf("service %s:80 answered pod %s with hostname %q, want over", svc.Spec.ClusterIP, under.Name, got)
	}
}

// checkClientIP: src reaches dst's netexec over HTTP and dst sees src's own
// address.
func checkClientIP(t *testing.T, srcNS string, src, dst *corev1.Pod) {
	t.Helper()
	route := fmt.Sprintf("%s (%s, %s) -> %s (%s, %s)", src.Name, src.Status.PodIP, src.Spec.NodeName, dst.Name, dst.Status.PodIP, dst.Spec.NodeName)
	var seen string
	eventually(t, route+": HTTP /clientip answered", reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = dialFrom(ctx, srcNS, "http", "clientip", dst.Status.PodIP, httpPort)
		return err
	})
	if hostOf(seen) != src.Status.PodIP {
		t.Errorf("%s: the peer saw the client as %s, want the pod's own address %s", route, seen, src.Status.PodIP)
	}
}

// checkOutsideDomain: the manager reports OutsideNetworkDomain on the pod
// (or, when the kubelet refused the pod for its node affinity before the
// manager looked at it, the pod failed and so never needed one), and the
// pod has neither an address nor an IPInstance.
func (e *labEnv) checkOutsideDomain(t *testing.T, ns, name, node string) {
	t.Helper()
	var ev corev1.Event
	refused := false
	eventually(t, fmt.Sprintf("an OutsideNetworkDomain event from %s on pod %s/%s", managerName, ns, name), 2*time.Minute, func(ctx context.Context) error {
		var l corev1.EventList
		if err := e.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, x := range l.Items {
			if x.InvolvedObject.Kind != "Pod" || x.InvolvedObject.Name != name {
				continue
			}
			if x.Reason == "OutsideNetworkDomain" && (x.ReportingController == managerName || x.Source.Component == managerName) {
				ev = x
				return nil
			}
			seen = append(seen, x.Reason)
		}
		var p corev1.Pod
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "NodeAffinity" && slices.Contains(seen, "NodeAffinity") {
			refused = true
			return nil
		}
		return fmt.Errorf("events of the pod: %v", seen)
	})
	if refused {
		t.Logf("the kubelet refused pod %s for its node affinity before the manager looked at it", name)
	} else if !strings.Contains(ev.Message, node) || !strings.Contains(ev.Message, underlayNetwork) {
		t.Errorf("event message %q does not name node %s and network %s", ev.Message, node, underlayNetwork)
	}
	ctx := testCtx(t, time.Minute)
	var p corev1.Pod
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != node || p.Status.PodIP != "" || podReady(&p) {
		t.Errorf("pod %s: node %q, address %q, ready %v; want %s, no address, not ready", name, p.Spec.NodeName, p.Status.PodIP, podReady(&p), node)
	}
	ipis, err := e.instances(ctx, ns, map[string]string{estuaryv1.LabelPod: name})
	if err != nil {
		t.Fatal(err)
	}
	if len(ipis) != 0 {
		t.Errorf("pod %s outside the domain has %d IPInstances (first %s)", name, len(ipis), instanceAddr(&ipis[0]))
	}
}
