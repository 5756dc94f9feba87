package translate

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// FuzzNodeAnnotations: remoteOf, which reads the tunnel endpoint every
// other node publishes in its vtep-ip and vtep-mac annotations, never
// panics; a node without both is no error and no remote; a value it
// refuses gets an error naming the node and the annotation; what it
// accepts is the annotations' address (unmapped) and MAC, a unicast
// address a tunnel can reach and a unicast MAC, and reads back from its
// own text. NeighTable, which joins the node's MAC with the address of a
// record bound to it (IPInstance spec.address.ip), never panics and points
// exactly the records' parsable addresses at the accepted MAC.
func FuzzNodeAnnotations(f *testing.F) {
	for _, s := range [][3]string{
		{"10.0.0.2", "02:00:0a:00:00:02", "10.1.0.5/24"},
		{"fd00::2", "02:00:0a:00:00:02", "fd00:1::5/64"},
		{"::ffff:10.0.0.2", "02-00-0A-00-00-02", "10.1.0.5/32"},
		{"fe80::1%eth0", "02:00:0a:00:00:02", "10.1.0.5"},
		{"0.0.0.0", "02:00:0a:00:00:02", ""},
		{"::", "02:00:0a:00:00:02", "::/0"},
		{"224.0.0.1", "02:00:0a:00:00:02", "0.0.0.0/0"},
		{"ff02::1", "02:00:0a:00:00:02", "fd00::1/129"},
		{"255.255.255.255", "02:00:0a:00:00:02", "10.1.0.5/24 "},
		{"127.0.0.1", "02:00:0a:00:00:02", "10.1.0.005/24"},
		{"10.0.0.2", "00:00:00:00:00:00", "10.1.0.5/24"},
		{"10.0.0.2", "ff:ff:ff:ff:ff:ff", "10.1.0.5/24"},
		{"10.0.0.2", "01:00:5e:00:00:01", "10.1.0.5/24"},
		{"10.0.0.2", "00:00:00:00:fe:80:00:00", "10.1.0.5/24"},
		{"10.0.0.2 ", "02:00:0a:00:00:02", "10.1.0.5/24"},
		{"", "02:00:0a:00:00:02", "10.1.0.5/24"},
		{"10.0.0.2", "", "10.1.0.5/24"},
	} {
		f.Add("node-b", s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, name, ipS, macS, recIP string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{estuaryv1.AnnotationVTEPIP: ipS, estuaryv1.AnnotationVTEPMAC: macS}}}
		r, ok, err := remoteOf(n)
		checkRemote(t, n, r, ok, err)
		rec := objtest.Instance(recIP, name, estuaryv1.IPInstanceBound)
		table := NeighTable(name+"-self", Objects{Nodes: []*corev1.Node{n}, Records: objtest.Records(rec)})
		p, perr := netip.ParsePrefix(recIP)
		if !ok || perr != nil {
			if len(table) != 0 {
				t.Fatalf("node %q (%v, %v) and record %q give neighbours %v", name, ok, err, recIP, table)
			}
			return
		}
		if len(table) != 1 || table[p.Addr()] != r.MAC {
			t.Fatalf("record %q on node %q: neighbours %v, want %s at %s", recIP, name, table, p.Addr(), r.MAC)
		}
	})
}

func checkRemote(t *testing.T, n *corev1.Node, r overlay.Remote, ok bool, err error) {
	t.Helper()
	ipS, macS := n.Annotations[estuaryv1.AnnotationVTEPIP], n.Annotations[estuaryv1.AnnotationVTEPMAC]
	switch {
	case ipS == "" || macS == "":
		if ok || err != nil {
			t.Fatalf("node without both annotations: %+v, %v, %v", r, ok, err)
		}
	case err != nil:
		msg := err.Error()
		if ok || !strings.Contains(msg, "node "+n.Name+":") ||
			!strings.Contains(msg, estuaryv1.AnnotationVTEPIP) && !strings.Contains(msg, estuaryv1.AnnotationVTEPMAC) {
			t.Fatalf("refused %q %q: %v (ok %v), want an error naming the node and the annotation", ipS, macS, err, ok)
		}
	case !ok:
		t.Fatalf("%q %q: neither a remote nor an error", ipS, macS)
	default:
		ip, perr := netip.ParseAddr(ipS)
		mac, merr := desired.ParseMAC(macS)
		if perr != nil || merr != nil || r.VTEP != ip.Unmap() || r.MAC != mac || r.Node != n.Name {
			t.Fatalf("accepted %q %q as %+v", ipS, macS, r)
		}
		v := r.VTEP
		if !v.IsValid() || v.Is4In6() || v.Zone() != "" || v.IsUnspecified() || v.IsLoopback() || v.IsMulticast() ||
			v == netip.MustParseAddr("255.255.255.255") || mac.IsZero() || mac.IsMulticast() {
			t.Fatalf("accepted %q %q, no tunnel endpoint", ipS, macS)
		}
		if again, err := netip.ParseAddr(v.String()); err != nil || again != v {
			t.Fatalf("%s reads back as %s, %v", v, again, err)
		}
	}
}
