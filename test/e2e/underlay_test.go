//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
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
	"github.com/estuary-cni/estuary/internal/lab"
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
	for _, o := range []client.Object{nw, sn} {
		t.Cleanup(func() { e.deleteAndWait(t, o) })
		if err := e.c.Create(testCtx(t, time.Minute), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	return sn
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

	t.Run("underlay pod reaches every node", func(t *testing.T) {
		for _, n := range e.nodes {
			checkPing(t, fmt.Sprintf("%s -> %s", under.Name, n), underNS, e.nodeAddr[n], 3)
		}
	})

	t.Run("underlay pod to overlay pod", func(t *testing.T) {
		checkClientIP(t, underNS, &under, &over)
	})

	t.Run("overlay pod to underlay pod", func(t *testing.T) {
		checkClientIP(t, overNS, &over, &under)
	})

	t.Run("pod bound to a node outside the domain gets no address", func(t *testing.T) {
		e.checkOutsideDomain(t, ns, "outside", "node-3")
	})

	t.Run("ClusterIP service backed by an overlay pod", func(t *testing.T) {
		e.checkServiceFromUnderlay(t, ns, underNS, &under)
	})
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

// checkOutsideDomain: the manager reports OutsideNetworkDomain on the pod,
// and the pod has neither an address nor an IPInstance.
func (e *labEnv) checkOutsideDomain(t *testing.T, ns, name, node string) {
	t.Helper()
	var ev corev1.Event
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
		return fmt.Errorf("events of the pod: %v", seen)
	})
	if !strings.Contains(ev.Message, node) || !strings.Contains(ev.Message, underlayNetwork) {
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

// TestUnderlayStatefulSetKeepsAddressAcrossDomainNodes: the pod of a
// one-replica StatefulSet of network rack1 moves node-1 -> node-2 -> back
// (its node cordoned each time) and keeps its underlay address; the
// external host reaches it at that address on every node, so the router's
// neighbour entry followed the move.
func TestUnderlayStatefulSetKeepsAddressAcrossDomainNodes(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	sn := e.createUnderlay(t)
	cidr := netip.MustParsePrefix(sn.Spec.Range.CIDR)
	ns := e.newNamespace(t, "underlay-sts")
	sts := statefulSet(ns, "fixed", 1)
	sts.Spec.Template.Annotations = map[string]string{estuaryv1.AnnotationNetwork: underlayNetwork}
	if err := e.c.Create(testCtx(t, time.Minute), sts); err != nil {
		t.Fatalf("create statefulset %s: %v", sts.Name, err)
	}
	pods := e.waitReady(t, ns, map[string]string{"app": sts.Name}, 1, 3*time.Minute)
	ip := pods[0].Status.PodIP
	if a, err := netip.ParseAddr(ip); err != nil || !cidr.Contains(a) {
		t.Fatalf("pod %s has address %q, want one in %s", pods[0].Name, ip, cidr)
	}
	e.checkExternalReaches(t, pods[0].Name, ip)
	for i := range 2 {
		t.Run(fmt.Sprintf("move %d", i+1), func(t *testing.T) {
			e.moveStatefulPod(t, ns, pods[0].Name, ip)
			var p corev1.Pod
			if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Namespace: ns, Name: pods[0].Name}, &p); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(underlayNodes, p.Spec.NodeName) {
				t.Errorf("pod %s moved to %s, outside the domain %v", p.Name, p.Spec.NodeName, underlayNodes)
			}
			e.checkRouterNeighbour(t, ip, p.Spec.NodeName)
			e.checkExternalReaches(t, p.Name+" on "+p.Spec.NodeName, ip)
		})
	}
}

// checkRouterNeighbour: the router's neighbour entry for ip, which traffic
// before the move created, points at node's uplink before the router sends
// anything to ip again: the node announced the moved address (gratuitous
// ARP).
func (e *labEnv) checkRouterNeighbour(t *testing.T, ip, node string) {
	t.Helper()
	mac, err := e.run(testCtx(t, time.Minute), node, "cat", "/sys/class/net/eth0/address")
	if err != nil {
		t.Fatal(err)
	}
	mac = strings.TrimSpace(mac)
	eventually(t, fmt.Sprintf("the router's neighbour entry for %s is %s's eth0 (%s)", ip, node, mac), 30*time.Second, func(ctx context.Context) error {
		out, err := e.run(ctx, "router", "ip", "-j", "neigh", "show", ip, "dev", "eth0")
		if err != nil {
			return err
		}
		var ns []struct {
			LLAddr string `json:"lladdr"`
		}
		if err := json.Unmarshal([]byte(out), &ns); err != nil {
			return fmt.Errorf("parse %q: %w", out, err)
		}
		if len(ns) == 0 || ns[0].LLAddr != mac {
			return fmt.Errorf("entries %s", out)
		}
		return nil
	})
}

// checkExternalReaches: the external host gets an answer from ip's netexec
// and the pod sees the external host's own address.
func (e *labEnv) checkExternalReaches(t *testing.T, what, ip string) {
	t.Helper()
	u := fmt.Sprintf("http://%s:%d/clientip", ip, httpPort)
	var seen string
	eventually(t, fmt.Sprintf("external -> %s (%s)", u, what), reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = httpGet(ctx, e.externalNetns, u)
		return err
	})
	if hostOf(seen) != e.externalAddr {
		t.Errorf("%s saw the external host as %s, want %s", what, seen, e.externalAddr)
	}
}

// TestUnderlayFullNetworkPodStaysPending: in a network whose only subnet
// holds one address, a second pod is not scheduled while the first holds
// it (the scheduler reports the node affinity the webhook added), and is
// placed and started once the first pod is gone.
func TestUnderlayFullNetworkPodStaysPending(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	sn := e.createUnderlayRange(t, 250, 250)
	only := string(sn.Spec.Range.Start)
	ns := e.newNamespace(t, "underlay-full")
	e.mustCreate(t, ns, underlayPod("first", ""))
	first := e.waitPods(t, ns, "first")["first"]
	if first.Status.PodIP != only {
		t.Fatalf("pod first has address %q, want the subnet's only one %s", first.Status.PodIP, only)
	}
	e.mustCreate(t, ns, underlayPod("second", ""))
	eventually(t, "pod second unschedulable for node affinity", 2*time.Minute, func(ctx context.Context) error {
		var p corev1.Pod
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "second"}, &p); err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				if !strings.Contains(c.Message, "affinity") {
					return fmt.Errorf("unschedulable for another reason: %s", c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("not reported unschedulable: %s", describePod(&p))
	})
	if err := e.c.Delete(testCtx(t, time.Minute), &first); err != nil {
		t.Fatalf("delete pod first: %v", err)
	}
	second := e.waitPods(t, ns, "second")["second"]
	if second.Status.PodIP != only || !slices.Contains(underlayNodes, second.Spec.NodeName) {
		t.Errorf("pod second: address %q on %s, want %s on one of %v", second.Status.PodIP, second.Spec.NodeName, only, underlayNodes)
	}
}

// vlanSupport returns why the kernel cannot make 802.1Q sub-interfaces, or
// nil: it tries one on a veth in a scratch network namespace.
func vlanSupport(ctx context.Context) error {
	ns := fmt.Sprintf("estlab-e2e-vlan-%d", time.Now().UnixNano())
	run := func(args ...string) error {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run("netns", "add", ns); err != nil {
		return err
	}
	defer func() { _ = run("netns", "delete", ns) }()
	if err := run("-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"); err != nil {
		return err
	}
	return run("-n", ns, "link", "add", "link", "v0", "name", "v0.100", "type", "vlan", "id", "100")
}

// TestUnderlayTaggedVLAN: an Underlay network with netID 100 puts its pods
// on node-1/node-2's eth0.100, created when first needed; the router holds
// the subnet's gateway on its own eth0.100, and the external host and the
// pod reach each other without NAT. Kernels without 802.1Q skip it.
func TestUnderlayTaggedVLAN(t *testing.T) {
	if err := vlanSupport(testCtx(t, time.Minute)); err != nil {
		t.Skipf("the kernel cannot make 802.1Q VLAN sub-interfaces: %v", err)
	}
	e := needLab(t)
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	const vlan, cidr, gw = "eth0.100", "10.77.101.0/24", "10.77.101.1"
	ctx := testCtx(t, time.Minute)
	for _, args := range [][]string{
		{"ip", "link", "add", "link", "eth0", "name", vlan, "type", "vlan", "id", "100"},
		{"ip", "addr", "add", gw + "/24", "dev", vlan},
		{"ip", "link", "set", vlan, "up"},
	} {
		if _, err := e.run(ctx, "router", args...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = e.run(context.Background(), "router", "ip", "link", "delete", vlan) })
	prefix := netip.MustParsePrefix(cidr)
	nw := &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: "rack1-vlan100"},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN,
			NetID: ptr.To[int64](100), NodeSelector: map[string]string{rackLabel: rackValue}},
	}
	sn := &estuaryv1.Subnet{
		ObjectMeta: metav1.ObjectMeta{Name: "rack1-vlan100-v4"},
		Spec: estuaryv1.SubnetSpec{Network: nw.Name, Range: estuaryv1.AddressRange{
			Version: 4, CIDR: cidr, Gateway: gw,
			Start: estuaryv1.IPAddress(nthAddr(prefix, 10).String()), End: estuaryv1.IPAddress(nthAddr(prefix, 200).String()),
		}},
	}
	for _, o := range []client.Object{nw, sn} {
		t.Cleanup(func() { e.deleteAndWait(t, o) })
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	ns := e.newNamespace(t, "underlay-tagged")
	p := netexecPod("tagged", "node-1", nil)
	p.Annotations = map[string]string{estuaryv1.AnnotationNetwork: nw.Name}
	e.mustCreate(t, ns, p)
	pod := e.waitPods(t, ns, "tagged")["tagged"]
	if a, err := netip.ParseAddr(pod.Status.PodIP); err != nil || !prefix.Contains(a) {
		t.Fatalf("pod %s has address %q, want one in %s", pod.Name, pod.Status.PodIP, cidr)
	}
	if _, err := e.run(ctx, "node-1", "ip", "link", "show", vlan); err != nil {
		t.Errorf("node-1 has no %s: %v", vlan, err)
	}
	serveClientIP(t, e.externalNetns, fmt.Sprintf("%s:%d", e.externalAddr, externalPort))
	e.checkExternalBothWays(t, &pod, e.podNetns(t, &pod))
}
