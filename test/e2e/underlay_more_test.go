//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

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
// holds one address, once the manager has labelled the domain's nodes full,
// a second pod is not scheduled while the first holds the address (the
// scheduler reports the node affinity the webhook added), and is placed
// and started once the first pod is gone.
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
	e.waitAvailable(t, underlayNetwork, "false", underlayNodes)
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
// nil: it tries one on a veth in a scratch network namespace of the test.
func vlanSupport(t *testing.T) error {
	ns := filepath.Base(nstest.New(t))
	ctx := testCtx(t, time.Minute)
	run := func(args ...string) error {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
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
	if err := vlanSupport(t); err != nil {
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
	e.createNetwork(t, nw, sn)
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
