//go:build lab

package e2e_test

// The dual-stack overlay, Services and fixed addresses on a dual lab
// (ESTUARY_E2E_IP_FAMILY=dual): default-network pods take one address of
// overlay-v4 and one of overlay-v6 (fd78::/64). Every check sends real
// packets: HTTP to agnhost netexec's /clientip tells what source address
// the peer saw, so "no NAT" and "SNAT to the node" are read off the wire
// rather than off the configuration. The external host's IPv6 /clientip
// server listens on a port the kernel picks, so it never collides with
// another test's server on the shared external namespace.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/ipamcheck"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

// overlayV6Subnet is the default network's IPv6 subnet on a dual lab.
const overlayV6Subnet = "overlay-v6"

// famAddrs is a pod's address of each family.
type famAddrs struct{ v4, v6 string }

// overlayCIDRs are the CIDRs of the default network's two subnets, read
// from the cluster; overlay-v6 must be the lab plan's overlay subnet.
func (e *labEnv) overlayCIDRs(t *testing.T) (v4, v6 netip.Prefix) {
	t.Helper()
	get := func(name string) netip.Prefix {
		var sn estuaryv1.Subnet
		if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: name}, &sn); err != nil {
			t.Fatalf("get subnet %s: %v", name, err)
		}
		return netip.MustParsePrefix(sn.Spec.Range.CIDR)
	}
	v4, v6 = get(overlaySubnet), get(overlayV6Subnet)
	if want := e.ipv6(t).OverlaySubnet; v6.String() != want {
		t.Fatalf("subnet %s is %s, want the lab's IPv6 overlay subnet %s", overlayV6Subnet, v6, want)
	}
	return v4, v6
}

// podFamilies requires status.podIPs to hold exactly one address in v4 and
// one in v6, and returns them.
func podFamilies(t *testing.T, p *corev1.Pod, v4, v6 netip.Prefix) famAddrs {
	t.Helper()
	var got famAddrs
	for _, ip := range p.Status.PodIPs {
		a, err := netip.ParseAddr(ip.IP)
		switch {
		case err != nil:
			t.Fatalf("pod %s: address %q: %v", p.Name, ip.IP, err)
		case a.Is4() && v4.Contains(a) && got.v4 == "":
			got.v4 = a.String()
		case a.Is6() && v6.Contains(a) && got.v6 == "":
			got.v6 = a.String()
		default:
			t.Fatalf("pod %s: address %s is not the only one in %s or %s (podIPs %v)", p.Name, a, v4, v6, p.Status.PodIPs)
		}
	}
	if got.v4 == "" || got.v6 == "" {
		t.Fatalf("pod %s has podIPs %v, want one address in %s and one in %s", p.Name, p.Status.PodIPs, v4, v6)
	}
	return got
}

// checkFamilyRecords: the pod's records are its IPv4 address in overlay-v4
// and its IPv6 address in overlay-v6.
func (e *labEnv) checkFamilyRecords(t *testing.T, p *corev1.Pod, want famAddrs) {
	t.Helper()
	e.checkRecordsBySubnet(t, p, map[string]string{overlaySubnet: want.v4, overlayV6Subnet: want.v6})
}

// checkRecordsBySubnet: the pod has exactly one IPInstance per subnet of
// want, Bound to its node, with want's address of that subnet.
func (e *labEnv) checkRecordsBySubnet(t *testing.T, p *corev1.Pod, want map[string]string) {
	t.Helper()
	ipis, err := e.instances(testCtx(t, time.Minute), p.Namespace, map[string]string{estuaryv1.LabelPod: p.Name})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for i := range ipis {
		r := &ipis[i]
		got[r.Spec.Subnet] = instanceAddr(r)
		if r.Status.Phase != estuaryv1.IPInstanceBound || r.Spec.Binding.NodeName != p.Spec.NodeName {
			t.Errorf("pod %s: IPInstance %s is %q on node %q, want Bound on %s", p.Name, r.Name, r.Status.Phase, r.Spec.Binding.NodeName, p.Spec.NodeName)
		}
	}
	if len(ipis) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pod %s: %d IPInstances, addresses by subnet %v; want %v", p.Name, len(ipis), got, want)
	}
}

// checkClientIPFrom: a netexec /dial from the pod whose namespace is srcNS
// to host's /clientip (an HTTP server on port) is answered, and the server
// saw the client as want.
func checkClientIPFrom(t *testing.T, what, srcNS, host string, port int, want string) {
	t.Helper()
	var seen string
	eventually(t, fmt.Sprintf("%s: HTTP /clientip on %s", what, net.JoinHostPort(host, strconv.Itoa(port))), reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = dialFrom(ctx, srcNS, "http", "clientip", host, port)
		return err
	})
	if hostOf(seen) != want {
		t.Errorf("%s: the server saw the client as %s, want %s", what, seen, want)
		return
	}
	t.Logf("%s: the server saw the client as %s", what, hostOf(seen))
}

// checkPing6 requires count of count ICMPv6 echo requests from nsPath to
// dst answered, retrying until the path is up.
func checkPing6(t *testing.T, what, nsPath, dst string, count int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s: %d of %d ICMPv6 echo requests to %s answered", what, count, count, dst), reachTimeout, func(context.Context) error {
		return ping6(nsPath, dst, count)
	})
}

// ping6 sends count ICMPv6 echo requests from nsPath to dst and waits up
// to two seconds for every answer.
func ping6(nsPath, dst string, count int) error {
	ip := net.ParseIP(dst)
	if ip == nil || ip.To4() != nil {
		return fmt.Errorf("ping6: %q is not an IPv6 address", dst)
	}
	var c *icmp.PacketConn
	if err := nsrun.Do(nsPath, func() error {
		var err error
		c, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	}); err != nil {
		return fmt.Errorf("ICMPv6 socket in %s: %w", nsPath, err)
	}
	defer func() { _ = c.Close() }()
	id := rand.IntN(0xffff) + 1
	for seq := range count {
		// The kernel fills in the ICMPv6 checksum of a raw socket.
		b, err := (&icmp.Message{Type: ipv6.ICMPTypeEchoRequest, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("estuary-e2e")}}).Marshal(nil)
		if err != nil {
			return err
		}
		if _, err := c.WriteTo(b, &net.IPAddr{IP: ip}); err != nil {
			return fmt.Errorf("send echo request to %s: %w", dst, err)
		}
	}
	if err := c.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	answered := map[int]bool{}
	buf := make([]byte, 1500)
	for len(answered) < count {
		n, peer, err := c.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("%d of %d echo requests to %s answered: %w", len(answered), count, dst, err)
		}
		m, err := icmp.ParseMessage(58, buf[:n]) // 58: ICMPv6
		if err != nil || m.Type != ipv6.ICMPTypeEchoReply {
			continue
		}
		if echo, ok := m.Body.(*icmp.Echo); ok && echo.ID == id && hostOf(peer.String()) == ip.String() {
			answered[echo.Seq] = true
		}
	}
	return nil
}

// serveClientIPAnyPort serves /clientip (the client's address) on host, on
// a port the kernel picks, inside nsPath, and returns the port.
func serveClientIPAnyPort(t *testing.T, nsPath, host string) int {
	t.Helper()
	var port int
	err := nsrun.Do(nsPath, func() error {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	})
	if err != nil {
		t.Fatalf("pick a port on %s in %s: %v", host, nsPath, err)
	}
	serveClientIP(t, nsPath, net.JoinHostPort(host, strconv.Itoa(port)))
	return port
}

// TestDualStackOverlayPods: netexec pods on node-1 and node-2 each get one
// overlay-v4 and one overlay-v6 address, recorded by their IPInstances;
// they reach each other over IPv4 and IPv6 (HTTP, UDP, ICMPv6) and each
// sees the other's own address; node-3 reaches the pod on node-2 over IPv6
// and the pod sees node-3's IPv6 switch address; the pod on node-1 reaches
// the external host over IPv6, which sees node-1's IPv6 address
// (overlay-v6 has natOutgoing).
func TestDualStackOverlayPods(t *testing.T) {
	e := needFamily(t, "dual")
	v6plan := e.ipv6(t)
	cidr4, cidr6 := e.overlayCIDRs(t)
	ns := e.newNamespace(t, "ds-overlay")
	e.mustCreate(t, ns, netexecPod("a", "node-1", nil), netexecPod("b", "node-2", nil))
	pods := e.waitPods(t, ns, "a", "b")
	a, b := pods["a"], pods["b"]
	addrs := map[string]famAddrs{}
	for _, p := range []*corev1.Pod{&a, &b} {
		addrs[p.Name] = podFamilies(t, p, cidr4, cidr6)
		e.checkFamilyRecords(t, p, addrs[p.Name])
	}
	t.Logf("a on node-1: %v; b on node-2: %v", addrs["a"], addrs["b"])
	netns := map[string]string{"a": e.podNetns(t, &a), "b": e.podNetns(t, &b)}
	for _, c := range []struct{ src, dst string }{{"a", "b"}, {"b", "a"}} {
		src, dst := addrs[c.src], addrs[c.dst]
		t.Run(c.src+" to "+c.dst+" over IPv4", func(t *testing.T) {
			checkClientIPFrom(t, fmt.Sprintf("%s (%s) -> %s (%s)", c.src, src.v4, c.dst, dst.v4), netns[c.src], dst.v4, httpPort, src.v4)
		})
		t.Run(c.src+" to "+c.dst+" over IPv6", func(t *testing.T) {
			what := fmt.Sprintf("%s (%s) -> %s (%s)", c.src, src.v6, c.dst, dst.v6)
			checkClientIPFrom(t, what, netns[c.src], dst.v6, httpPort, src.v6)
			var host string
			eventually(t, what+": UDP hostname", reachTimeout, func(ctx context.Context) error {
				var err error
				host, err = dialFrom(ctx, netns[c.src], "udp", "hostname", dst.v6, udpPort)
				return err
			})
			if host != c.dst {
				t.Errorf("%s: UDP hostname answered %q, want %q", what, host, c.dst)
			}
			checkPing6(t, what, netns[c.src], dst.v6, 5)
		})
	}
	t.Run("node-3 to b over IPv6 keeps the node address", func(t *testing.T) {
		u := fmt.Sprintf("http://%s/clientip", net.JoinHostPort(addrs["b"].v6, strconv.Itoa(httpPort)))
		var seen string
		eventually(t, "node-3 -> "+u, reachTimeout, func(ctx context.Context) error {
			var err error
			seen, err = httpGet(ctx, e.nodeNetns["node-3"], u)
			return err
		})
		if want := v6plan.Nodes["node-3"]; hostOf(seen) != want {
			t.Errorf("pod b on node-2 saw node-3 as %s, want node-3's IPv6 address %s (node to pod must not be NATed)", seen, want)
		}
		t.Logf("pod b (%s) saw node-3 as %s", addrs["b"].v6, hostOf(seen))
	})
	t.Run("a to the external host over IPv6 is masqueraded", func(t *testing.T) {
		port := serveClientIPAnyPort(t, e.externalNetns, v6plan.External)
		checkClientIPFrom(t, fmt.Sprintf("a (%s) on node-1 -> external %s", addrs["a"].v6, v6plan.External),
			netns["a"], v6plan.External, port, v6plan.Nodes["node-1"])
	})
}

// TestDualStackServices: a RequireDualStack ClusterIP Service over netexec
// pods on node-1 and node-2 gets an IPv4 and an IPv6 (fd79::/112)
// ClusterIP, and a client pod on node-3 reaches a backend through each; the
// cluster DNS answers the client's A query for the Service with its IPv4
// ClusterIP and its AAAA query with its IPv6 one; a dual-stack NodePort
// Service answers on node-2's IPv6 address from node-1.
func TestDualStackServices(t *testing.T) {
	e := needFamily(t, "dual")
	v6plan := e.ipv6(t)
	ns := e.newNamespace(t, "ds-svc")
	sel := map[string]string{"app": "ds-backend"}
	e.mustCreate(t, ns, netexecPod("backend-1", "node-1", sel), netexecPod("backend-2", "node-2", sel), netexecPod("client", "node-3", nil))
	web := e.createDualService(t, ns, "web", corev1.ServiceTypeClusterIP, sel)
	np := e.createDualService(t, ns, "web-np", corev1.ServiceTypeNodePort, sel)
	pods := e.waitPods(t, ns, "backend-1", "backend-2", "client")
	client := pods["client"]
	clientNS := e.podNetns(t, &client)
	ips := serviceFamilies(t, web, netip.MustParsePrefix(e.families[0].ServiceCIDR), netip.MustParsePrefix(v6plan.ServiceCIDR))
	t.Logf("service web: ClusterIPs %v", web.Spec.ClusterIPs)
	for fam, ip := range map[string]string{"IPv4": ips.v4, "IPv6": ips.v6} {
		t.Run("ClusterIP "+fam, func(t *testing.T) { checkServiceAnswers(t, clientNS, "client", ip) })
	}
	for _, q := range []struct{ qtype, want string }{{"A", ips.v4}, {"AAAA", ips.v6}} {
		t.Run("DNS "+q.qtype, func(t *testing.T) {
			e.waitResolvesType(t, ns, "client", q.qtype, "web", q.want)
			e.waitResolvesType(t, ns, "client", q.qtype, "web."+ns+".svc."+lab.ClusterDomain, q.want)
		})
	}
	t.Run("NodePort on node-2's IPv6 address from node-1", func(t *testing.T) {
		port := np.Spec.Ports[0].NodePort
		u := fmt.Sprintf("http://%s/hostname", net.JoinHostPort(v6plan.Nodes["node-2"], strconv.Itoa(int(port))))
		var got string
		eventually(t, "node-1 -> "+u, reachTimeout, func(ctx context.Context) error {
			var err error
			got, err = httpGet(ctx, e.nodeNetns["node-1"], u)
			return err
		})
		if !slices.Contains([]string{"backend-1", "backend-2"}, got) {
			t.Errorf("%s answered hostname %q, want backend-1 or backend-2", u, got)
		}
	})
}

// createDualService creates a RequireDualStack Service of type typ, port
// 80 to the netexec HTTP port of the pods sel selects, and returns it as
// the API server made it.
func (e *labEnv) createDualService(t *testing.T, ns, name string, typ corev1.ServiceType, sel map[string]string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type: typ, Selector: sel,
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack),
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(httpPort)}},
		},
	}
	if err := e.c.Create(testCtx(t, time.Minute), svc); err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	return svc
}

// serviceFamilies requires the Service to have exactly two ClusterIPs, the
// first in v4 and the second in v6, and returns them.
func serviceFamilies(t *testing.T, svc *corev1.Service, v4, v6 netip.Prefix) famAddrs {
	t.Helper()
	ips := svc.Spec.ClusterIPs
	if len(ips) != 2 {
		t.Fatalf("service %s has ClusterIPs %v, want one per family", svc.Name, ips)
	}
	a4, err4 := netip.ParseAddr(ips[0])
	a6, err6 := netip.ParseAddr(ips[1])
	if err4 != nil || err6 != nil || !a4.Is4() || !v4.Contains(a4) || !a6.Is6() || !v6.Contains(a6) {
		t.Fatalf("service %s has ClusterIPs %v, want one in %s and one in %s", svc.Name, ips, v4, v6)
	}
	return famAddrs{v4: a4.String(), v6: a6.String()}
}

// waitResolvesType waits until `dig +short +search <qtype> name` in pod
// answers exactly the address want.
func (e *labEnv) waitResolvesType(t *testing.T, ns, pod, qtype, name, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s/%s resolves %s %s to %s", ns, pod, qtype, name, want), reachTimeout, func(ctx context.Context) error {
		got, err := e.podExec(ctx, ns, pod, "dig", "+short", "+search", "+time=2", "+tries=2", qtype, name)
		if err != nil {
			return err
		}
		if a, err := netip.ParseAddr(got); err != nil || a.String() != want {
			return fmt.Errorf("dig +short +search %s %s answered %q", qtype, name, got)
		}
		return nil
	})
}

// TestDualStackFixedIPs: on the default network, so with both families, a
// StatefulSet pod deleted and re-created keeps its IPv4 and its IPv6
// address; a retaining Deployment of two pods deleted and created again
// runs its new pods on the same addresses of each family; a pod whose
// ip-address names a free address of each family gets exactly those and
// is reached on its IPv6 one; then kubectl estuary check, reading every
// node's daemon, finds nothing wrong.
func TestDualStackFixedIPs(t *testing.T) {
	e := needFamily(t, "dual")
	cidr4, cidr6 := e.overlayCIDRs(t)
	var ns string
	t.Cleanup(func() { // after the namespace is gone: release what the Deployment kept
		if ns != "" {
			e.releaseKept(t, ns)
		}
	})
	ns = e.newNamespace(t, "ds-fixed")
	records := 0
	var db corev1.Pod
	t.Run("StatefulSet pod re-created keeps both addresses", func(t *testing.T) {
		if err := e.c.Create(testCtx(t, time.Minute), statefulSet(ns, "db", 1)); err != nil {
			t.Fatal(err)
		}
		old := e.waitReady(t, ns, map[string]string{"app": "db"}, 1, 3*time.Minute)[0]
		before := podFamilies(t, &old, cidr4, cidr6)
		e.checkFamilyRecords(t, &old, before)
		db = e.recreatePod(t, &old)
		after := podFamilies(t, &db, cidr4, cidr6)
		if after != before {
			t.Errorf("re-created StatefulSet pod %s runs on %v (node %s), want its old addresses %v (node %s)", db.Name, after, db.Spec.NodeName, before, old.Spec.NodeName)
		}
		e.checkFamilyRecords(t, &db, after)
		t.Logf("%s on %s %v, re-created on %s %v", db.Name, old.Spec.NodeName, before, db.Spec.NodeName, after)
		records += 2
	})
	t.Run("retaining Deployment re-created keeps both addresses", func(t *testing.T) {
		before, after := e.redeployDual(t, ns, 2, cidr4, cidr6)
		for fam, pair := range map[string][2][]string{"IPv4": {before[0], after[0]}, "IPv6": {before[1], after[1]}} {
			if !slices.Equal(pair[0], pair[1]) {
				t.Errorf("re-created Deployment runs on %s addresses %v, want its old ones %v", fam, pair[1], pair[0])
			}
		}
		t.Logf("Deployment keep before %v, after %v", before, after)
		records += 4
	})
	t.Run("ip-address with one address per family", func(t *testing.T) {
		want := famAddrs{v4: e.freeOverlayAddr(t, cidr4, 64990), v6: e.freeOverlayAddr(t, cidr6, 0xe1e100)}
		p := netexecPod("pinned", "node-2", map[string]string{"app": "pinned"})
		p.Annotations = map[string]string{estuaryv1.AnnotationIPAddress: want.v4 + "," + want.v6}
		e.mustCreate(t, ns, p)
		got := e.waitPods(t, ns, "pinned")["pinned"]
		if addrs := podFamilies(t, &got, cidr4, cidr6); addrs != want {
			t.Fatalf("pod pinned asked for %s,%s and runs on %v", want.v4, want.v6, got.Status.PodIPs)
		}
		e.checkFamilyRecords(t, &got, want)
		records += 2
		if db.Name != "" {
			dbAddrs := podFamilies(t, &db, cidr4, cidr6)
			checkClientIPFrom(t, fmt.Sprintf("%s (%s) -> pinned (%s)", db.Name, dbAddrs.v6, want.v6), e.podNetns(t, &db), want.v6, httpPort, dbAddrs.v6)
		}
	})
	t.Run("kubectl estuary check is clean", func(t *testing.T) {
		r := e.waitCheckClean(t, e.plugin(t))
		if r.Nodes != len(e.nodes) || r.Subnets < 2 || r.Records < records {
			t.Errorf("check read %d of %d nodes, %d subnets, %d records; want every node, both overlay subnets and at least this test's %d records",
				r.Nodes, len(e.nodes), r.Subnets, r.Records, records)
		}
	})
}

// recreatePod deletes a pod its controller re-creates under the same name
// and returns the replacement once it is ready.
func (e *labEnv) recreatePod(t *testing.T, old *corev1.Pod) corev1.Pod {
	t.Helper()
	if err := e.c.Delete(testCtx(t, time.Minute), old); err != nil {
		t.Fatalf("delete pod %s: %v", old.Name, err)
	}
	var repl corev1.Pod
	eventually(t, "replacement of "+old.Name+" Running and Ready", 3*time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(old), &repl); err != nil {
			return err
		}
		if repl.UID == old.UID || !podReady(&repl) {
			return fmt.Errorf("not replaced yet: %s", describePod(&repl))
		}
		return nil
	})
	return repl
}

// redeployDual creates Deployment keep of n retaining netexec pods in ns,
// deletes it, waits until its 2n addresses are Retained, creates it again
// and returns its pods' IPv4 and IPv6 addresses before and after, each
// list sorted.
func (e *labEnv) redeployDual(t *testing.T, ns string, n int, cidr4, cidr6 netip.Prefix) (before, after [2][]string) {
	t.Helper()
	labels := map[string]string{"app": "keep"}
	deploy := func() *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{estuaryv1.AnnotationIPRetain: "true"}},
					Spec:       podTemplate("", netexecContainer()),
				}},
		}
	}
	addrs := func(pods []corev1.Pod) (out [2][]string) {
		for i := range pods {
			a := podFamilies(t, &pods[i], cidr4, cidr6)
			e.checkFamilyRecords(t, &pods[i], a)
			out[0], out[1] = append(out[0], a.v4), append(out[1], a.v6)
		}
		slices.Sort(out[0])
		slices.Sort(out[1])
		return out
	}
	if err := e.c.Create(testCtx(t, time.Minute), deploy()); err != nil {
		t.Fatal(err)
	}
	before = addrs(e.waitReady(t, ns, labels, n, 3*time.Minute))
	if err := e.c.Delete(testCtx(t, time.Minute), deploy(), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	e.waitNoPods(t, ns, labels, 2*time.Minute)
	e.waitRetained(t, ns, "keep", 2*n)
	eventually(t, "Deployment keep gone", time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	if err := e.c.Create(testCtx(t, time.Minute), deploy()); err != nil {
		t.Fatal(err)
	}
	return before, addrs(e.waitReady(t, ns, labels, n, 3*time.Minute))
}

// freeOverlayAddr is the first address from off positions into p that no
// IPInstance holds.
func (e *labEnv) freeOverlayAddr(t *testing.T, p netip.Prefix, off uint32) string {
	t.Helper()
	all, err := e.instances(testCtx(t, time.Minute), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for i := range all {
		held[instanceAddr(&all[i])] = true
	}
	b := p.Masked().Addr().AsSlice()
	tail := b[len(b)-4:]
	v := uint32(tail[0])<<24 | uint32(tail[1])<<16 | uint32(tail[2])<<8 | uint32(tail[3])
	v += off
	tail[0], tail[1], tail[2], tail[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	a, _ := netip.AddrFromSlice(b)
	for ; held[a.String()] && p.Contains(a.Next()); a = a.Next() {
	}
	if !p.Contains(a) || held[a.String()] {
		t.Fatalf("no free address in %s from offset %d", p, off)
	}
	return a.String()
}

// waitCheckClean runs kubectl estuary check (judging every record, however
// young) until it exits 0 with no finding, and returns its report; other
// work on a shared lab may leave passing findings.
func (e *labEnv) waitCheckClean(t *testing.T, plugin string) ipamcheck.Report {
	t.Helper()
	var r ipamcheck.Report
	runs, start := 0, time.Now()
	eventually(t, "kubectl estuary check exits 0 with no finding", 90*time.Second, func(context.Context) error {
		runs++
		out, err := runPlugin(plugin, e.kubeconfig, "check", "-o", "json", "--grace", "0s", "--interval", "1s")
		r = ipamcheck.Report{}
		if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
			return fmt.Errorf("check: %w; its report does not parse: %w", err, jerr)
		}
		if err != nil {
			return fmt.Errorf("check: %w; findings:\n%s", err, findingLines(r))
		}
		if len(r.Findings) > 0 {
			return fmt.Errorf("check exited 0 with findings:\n%s", findingLines(r))
		}
		return nil
	})
	t.Logf("kubectl estuary check (run %d, after %s): %d records, %d pods, %d subnets, %d endpoints on %d nodes: 0 problems",
		runs, time.Since(start).Round(time.Second), r.Records, r.Pods, r.Subnets, r.Endpoints, r.Nodes)
	return r
}
