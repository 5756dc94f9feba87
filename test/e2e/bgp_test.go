//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

// The BGP underlay network the tests create: its pod subnet is on no link;
// the lab's router (bird2, AS lab.RouterASN) learns each pod address from
// the node that holds it.
const (
	bgpNetwork = "as64600"
	bgpSubnet  = "as64600-v4"
	bgpLabel   = "estuary-e2e/bgp"
)

var bgpNodes = []string{"node-1", "node-2"}

// createBGP creates the BGP network (netID = the nodes' AS, peer = the
// router) and its subnet, deleted when the test ends.
func (e *labEnv) createBGP(t *testing.T) *estuaryv1.Subnet {
	t.Helper()
	prefix := netip.MustParsePrefix(lab.BGPCIDR)
	nw := &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: bgpNetwork},
		Spec: estuaryv1.NetworkSpec{
			Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](lab.NodeASN),
			NodeSelector: map[string]string{bgpLabel: bgpNetwork},
			BGPPeers:     []estuaryv1.BGPPeer{{Address: e.routerAddr, ASN: lab.RouterASN}},
		},
	}
	sn := &estuaryv1.Subnet{
		ObjectMeta: metav1.ObjectMeta{Name: bgpSubnet},
		Spec: estuaryv1.SubnetSpec{Network: bgpNetwork, Range: estuaryv1.AddressRange{
			Version: 4, CIDR: prefix.String(),
			Start: estuaryv1.IPAddress(nthAddr(prefix, 10).String()), End: estuaryv1.IPAddress(nthAddr(prefix, 200).String()),
		}},
	}
	e.createNetwork(t, nw, sn)
	return sn
}

// bgpPod is a netexec pod of the BGP network bound to node.
func bgpPod(name, node string) *corev1.Pod {
	p := netexecPod(name, node, nil)
	p.Annotations = map[string]string{estuaryv1.AnnotationNetwork: bgpNetwork}
	return p
}

// routerRoute returns the gateway of the router's kernel route to dst/32
// that bird installed from BGP, or "" when there is none.
func (e *labEnv) routerRoute(ctx context.Context, dst string) (string, error) {
	out, err := e.run(ctx, "router", "ip", "-j", "-4", "route", "show", dst+"/32", "proto", "bird")
	if err != nil {
		return "", err
	}
	var routes []struct {
		Gateway string `json:"gateway"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return "", fmt.Errorf("parse the router's routes to %s: %w (%q)", dst, err, out)
	}
	if len(routes) == 0 {
		return "", nil
	}
	return routes[0].Gateway, nil
}

// waitRouterRoute waits until the router routes dst via the node's address
// (or has no route to it, with node "").
func (e *labEnv) waitRouterRoute(t *testing.T, dst, node string) {
	t.Helper()
	want, what := e.nodeAddr[node], fmt.Sprintf("the router routes %s/32 via %s (%s)", dst, node, e.nodeAddr[node])
	if node == "" {
		what = fmt.Sprintf("the router has no BGP route to %s/32", dst)
	}
	eventually(t, what, 2*time.Minute, func(ctx context.Context) error {
		gw, err := e.routerRoute(ctx, dst)
		if err != nil {
			return err
		}
		if gw != want {
			return fmt.Errorf("route via %q", gw)
		}
		return nil
	})
}

// TestBGPUnderlay: pods of a BGP network on node-1 and node-2 are announced
// by their nodes to the router, which routes each /32 to the right node;
// the external host and the pods reach each other with their own
// addresses; overlay and BGP pods reach each other; restarting a node's
// daemon loses neither the route nor a ping; deleting a pod withdraws its
// route.
func TestBGPUnderlay(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, bgpLabel, bgpNetwork, bgpNodes...)
	sn := e.createBGP(t)
	cidr := netip.MustParsePrefix(sn.Spec.Range.CIDR)
	ns := e.newNamespace(t, "bgp")
	e.mustCreate(t, ns, bgpPod("bgp-a", "node-1"), bgpPod("bgp-b", "node-2"), netexecPod("over", "node-3", nil))
	pods := e.waitPods(t, ns, "bgp-a", "bgp-b", "over")
	a, b, over := pods["bgp-a"], pods["bgp-b"], pods["over"]
	for _, p := range []corev1.Pod{a, b} {
		if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || !cidr.Contains(ip) {
			t.Fatalf("pod %s has address %q, want one in %s", p.Name, p.Status.PodIP, cidr)
		}
	}

	t.Run("router learns each pod address from its node", func(t *testing.T) {
		e.waitRouterRoute(t, a.Status.PodIP, a.Spec.NodeName)
		e.waitRouterRoute(t, b.Status.PodIP, b.Spec.NodeName)
	})

	t.Run("network condition: every domain node has an established session", func(t *testing.T) {
		e.waitBGPEstablished(t)
	})

	t.Run("external host and pods reach each other without NAT", func(t *testing.T) {
		serveClientIP(t, e.externalNetns, fmt.Sprintf("%s:%d", e.externalAddr, externalPort))
		for _, p := range []corev1.Pod{a, b} {
			e.checkExternalBothWays(t, &p, e.podNetns(t, &p))
		}
	})

	t.Run("overlay pod and BGP pod reach each other through the tunnel", func(t *testing.T) {
		dropped := e.routerDropsFrom(t, lab.PodCIDR)
		checkClientIP(t, e.podNetns(t, &over), &over, &a)
		checkClientIP(t, e.podNetns(t, &a), &a, &over)
		if n := dropped(); n != 0 {
			t.Errorf("the router saw %d packets from the overlay %s: overlay-BGP traffic left the tunnel", n, lab.PodCIDR)
		}
	})

	t.Run("daemon restart loses no route and no ping", func(t *testing.T) {
		e.checkRestartKeepsBGP(t, &a)
	})

	t.Run("deleting a pod withdraws its route", func(t *testing.T) {
		if err := e.c.Delete(testCtx(t, time.Minute), &b); err != nil {
			t.Fatalf("delete pod %s: %v", b.Name, err)
		}
		e.waitRouterRoute(t, b.Status.PodIP, "")
		e.waitRouterRoute(t, a.Status.PodIP, a.Spec.NodeName)
	})
}

// waitBGPEstablished waits until the manager reports every domain node of
// the BGP network with an established session.
func (e *labEnv) waitBGPEstablished(t *testing.T) {
	t.Helper()
	eventually(t, fmt.Sprintf("network %s condition %s True", bgpNetwork, estuaryv1.ConditionBGPPeersEstablished), 2*time.Minute,
		func(ctx context.Context) error {
			var n estuaryv1.Network
			if err := e.c.Get(ctx, client.ObjectKey{Name: bgpNetwork}, &n); err != nil {
				return err
			}
			c := meta.FindStatusCondition(n.Status.Conditions, estuaryv1.ConditionBGPPeersEstablished)
			if c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
}

// checkExternalBothWays: the external host reaches the pod at its own
// address and sees the pod's own address when the pod calls it (the
// caller serves /clientip on the external host).
func (e *labEnv) checkExternalBothWays(t *testing.T, p *corev1.Pod, podNS string) {
	t.Helper()
	u := fmt.Sprintf("http://%s:%d/clientip", p.Status.PodIP, httpPort)
	var seen string
	eventually(t, "external -> "+u, reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = httpGet(ctx, e.externalNetns, u)
		return err
	})
	if hostOf(seen) != e.externalAddr {
		t.Errorf("pod %s saw the external host as %s, want %s", p.Name, seen, e.externalAddr)
	}
	eventually(t, fmt.Sprintf("pod %s -> external %s:%d", p.Name, e.externalAddr, externalPort), reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = dialFrom(ctx, podNS, "http", "clientip", e.externalAddr, externalPort)
		return err
	})
	if hostOf(seen) != p.Status.PodIP {
		t.Errorf("the external host saw pod %s as %s, want its own address %s", p.Name, seen, p.Status.PodIP)
	}
}

// checkRestartKeepsBGP: the external host pings the pod every 50 ms while
// the daemon of the pod's node is replaced; every echo is answered and the
// router still routes the pod via its node afterwards.
func (e *labEnv) checkRestartKeepsBGP(t *testing.T, p *corev1.Pod) {
	t.Helper()
	checkPing(t, "external -> "+p.Name+" before the restart", e.externalNetns, p.Status.PodIP, 3)
	pg, err := newPinger(e.externalNetns, p.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	stopc, streamErr := make(chan struct{}), make(chan error, 1)
	go func() { streamErr <- pg.stream(50*time.Millisecond, stopc) }()
	finished := false
	defer func() {
		if !finished {
			close(stopc)
			pg.finish(0)
		}
	}()
	e.replacePods(t, daemonName, p.Spec.NodeName)
	finished = true
	close(stopc)
	if err := <-streamErr; err != nil {
		t.Fatal(err)
	}
	sent, lost := pg.finish(3 * time.Second)
	t.Logf("external -> %s: %d echo requests over the daemon restart on %s, %d unanswered", p.Name, sent, p.Spec.NodeName, len(lost))
	if sent < 10 {
		t.Fatalf("only %d echo requests were sent during the restart", sent)
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d echo requests external -> %s (%s) unanswered while the daemon of %s restarted: sequence numbers %v",
			len(lost), sent, p.Name, p.Status.PodIP, p.Spec.NodeName, first(intStrings(lost), 50))
	}
	e.waitRouterRoute(t, p.Status.PodIP, p.Spec.NodeName)
}
