package ipwait

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// The wait rule: at least one Established session, and one with every peer
// marked requireEstablished.
func TestReady(t *testing.T) {
	spec := []estuaryv1.BGPPeer{{Address: "10.0.0.1", RequireEstablished: true}, {Address: "10.0.0.2"}, {Address: "fd00::1"}}
	for _, c := range []struct {
		name  string
		spec  []estuaryv1.BGPPeer
		peers []bgpstatus.PeerStatus
		want  bool
	}{
		{"none up", spec[1:], []bgpstatus.PeerStatus{peer("10.0.0.2", 1, bgpstatus.StateActive)}, false},
		{"any one up", spec[1:], []bgpstatus.PeerStatus{peer("10.0.0.2", 1, bgpstatus.StateIdle), peer("fd00::1", 1, bgpstatus.StateEstablished)}, true},
		{"required down, another up", spec, []bgpstatus.PeerStatus{peer("10.0.0.1", 1, bgpstatus.StateActive), peer("10.0.0.2", 1, bgpstatus.StateEstablished)}, false},
		{"required up, others down", spec, []bgpstatus.PeerStatus{peer("10.0.0.1", 1, bgpstatus.StateEstablished), peer("10.0.0.2", 1, bgpstatus.StateIdle)}, true},
		{"required peer not configured on the speaker", spec, []bgpstatus.PeerStatus{peer("10.0.0.2", 1, bgpstatus.StateEstablished)}, false},
		{"no speaker peers", spec[1:], nil, false},
	} {
		if got := Ready(c.spec, c.peers); got != c.want {
			t.Errorf("%s: Ready = %t, want %t", c.name, got, c.want)
		}
	}
}

// A GlobalBGP address waits as the node's BGP network says, for that
// network's speaker: here until the peer marked requireEstablished is up,
// whichever other session is. On a node of no BGP network the ADD fails at
// once, naming the node, with the BGP session reason.
func TestGateGlobalBGPWaitsForTheNodesBGPNetwork(t *testing.T) {
	f := gated(t)
	ensureNode(t, "node-a", map[string]string{"rack": "plain"})
	createAll(t,
		&estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "global"}, Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeGlobalBGP}},
		&estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "fabric-g"}, Spec: estuaryv1.NetworkSpec{
			Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](65010),
			NodeSelector: map[string]string{"bgp": "global"},
			BGPPeers: []estuaryv1.BGPPeer{{Address: "10.0.0.1", ASN: 65000, RequireEstablished: true},
				{Address: "10.0.0.2", ASN: 65000, DoesNotRouteTraffic: true}},
		}})

	bound(t, "stray", "u40", "global", "10.84.0.4/24")
	r := <-waitAsync("default", "stray", "u40", 10*time.Second)
	for _, want := range []string{"pod default/stray", "GlobalBGP network global", "node node-a is in the domain of no BGP-mode Underlay network"} {
		if r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Fatalf("error = %v; want one containing %q", r.err, want)
		}
	}
	if se := (*SessionError)(nil); !errors.As(r.err, &se) {
		t.Fatalf("error %v is not a SessionError, the mark of a bgp_session failure", r.err)
	}

	relabel(t, "node-a", map[string]string{"bgp": "global"})
	f.set("fabric-g", peer("10.0.0.1", 65000, bgpstatus.StateActive), peer("10.0.0.2", 65000, bgpstatus.StateEstablished))
	ch := waitAsync("default", "routed-global", "u41", 20*time.Second)
	bound(t, "routed-global", "u41", "global", "10.84.0.5/24")
	askedAbout(t, f, "fabric-g")
	select {
	case r := <-ch:
		t.Fatalf("returned %v, %v while the required peer 10.0.0.1 was down", r.addrs, r.err)
	default:
	}
	f.set("fabric-g", peer("10.0.0.1", 65000, bgpstatus.StateEstablished), peer("10.0.0.2", 65000, bgpstatus.StateActive))
	if r := <-ch; r.err != nil || strings.Join(r.addrs, ",") != "10.84.0.5/24" {
		t.Fatalf("got %v %v once the required session is Established; want 10.84.0.5/24", r.addrs, r.err)
	}
}

// relabel replaces node name's labels and waits until the waiter's cache
// has them.
func relabel(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	var n corev1.Node
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Labels = labels
	if err := k8s.Update(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "node "+name+" relabelled in the waiter's cache", 10*time.Second, func() error {
		var got corev1.Node
		if err := view.Get(context.Background(), client.ObjectKey{Name: name}, &got); err != nil {
			return err
		}
		if got.ResourceVersion != n.ResourceVersion {
			return context.DeadlineExceeded
		}
		return nil
	})
}
