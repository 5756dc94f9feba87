package bgpstatus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

func bg() context.Context { return context.Background() }

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(bg(), o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(bg(), o) })
	}
}

// annotate sets (or, with "", removes) a node's published session states,
// as its daemon does.
func annotate(t *testing.T, node, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, estuaryv1.AnnotationBGPPeers, v)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k8s.Patch(bg(), n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// waitCondition waits until the network's condition has status and reason
// and its message holds every one of contains; it returns the condition.
func waitCondition(t *testing.T, network string, status metav1.ConditionStatus, reason string, contains ...string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testenv.Eventually(t, fmt.Sprintf("network %s condition %s=%s (%s)", network, estuaryv1.ConditionBGPPeersEstablished, status, reason), 30*time.Second, func() error {
		n := &estuaryv1.Network{}
		if err := k8s.Get(bg(), client.ObjectKey{Name: network}, n); err != nil {
			return err
		}
		c := meta.FindStatusCondition(n.Status.Conditions, estuaryv1.ConditionBGPPeersEstablished)
		if c == nil {
			return fmt.Errorf("no condition in %+v", n.Status.Conditions)
		}
		if c.Status != status || c.Reason != reason || c.ObservedGeneration != n.Generation {
			return fmt.Errorf("condition %+v (generation %d)", *c, n.Generation)
		}
		for _, s := range contains {
			if !strings.Contains(c.Message, s) {
				return fmt.Errorf("message %q lacks %q", c.Message, s)
			}
		}
		got = *c
		return nil
	})
	return got
}

func TestConditionFollowsNodesAndNetwork(t *testing.T) {
	startManager(t)
	sel := map[string]string{"bgp-status": "fabric"}
	a := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bgp-a", Labels: sel}}
	b := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bgp-b", Labels: sel}}
	outside := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bgp-outside"}}
	vlan := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "plain-vlan"}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NodeSelector: sel}}
	fabric := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "fabric"}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](65010), NodeSelector: sel,
		BGPPeers: []estuaryv1.BGPPeer{{Address: "10.0.0.1", ASN: 65000}, {Address: "10.0.0.2", ASN: 65000}}}}
	create(t, a, b, outside, vlan, fabric)

	waitCondition(t, "fabric", metav1.ConditionFalse, ReasonNotEstablished,
		"2 of the 2 nodes", "bgp-a: no session state published", "bgp-b: no session state published")

	annotate(t, "bgp-a", `{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Established"},{"address":"10.0.0.2","asn":65000,"state":"Active"}]}`)
	annotate(t, "bgp-b", `{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Connect"},{"address":"10.0.0.2","asn":65000,"state":"Idle"}]}`)
	waitCondition(t, "fabric", metav1.ConditionFalse, ReasonNotEstablished,
		"1 of the 2 nodes", "bgp-b: peer 10.0.0.1 (AS 65000) Connect, peer 10.0.0.2 (AS 65000) Idle")

	annotate(t, "bgp-b", `{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Connect"},{"address":"10.0.0.2","asn":65000,"state":"Established"}]}`)
	up := waitCondition(t, "fabric", metav1.ConditionTrue, ReasonEstablished, "each of the 2 nodes")

	// A change elsewhere on a node (an unrelated annotation) leaves the
	// condition, and its transition time, as they are.
	annotate(t, "bgp-outside", `{"fabric":[]}`)
	if again := waitCondition(t, "fabric", metav1.ConditionTrue, ReasonEstablished); !again.LastTransitionTime.Equal(&up.LastTransitionTime) {
		t.Errorf("transition time moved from %v to %v without a change", up.LastTransitionTime, again.LastTransitionTime)
	}

	// A node joining the domain without a session makes it False again; a
	// spec change moves observedGeneration.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"bgp-status":"fabric"}}}`))
	if err := k8s.Patch(bg(), outside, patch); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, "fabric", metav1.ConditionFalse, ReasonNotEstablished, "1 of the 3 nodes", "bgp-outside: its speaker has no peer configured")
	patch = client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeSelector":{"bgp-status":"nowhere"}}}`))
	if err := k8s.Patch(bg(), fabric, patch); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, "fabric", metav1.ConditionFalse, ReasonNoNodes)

	// Only BGP networks get the condition.
	n := &estuaryv1.Network{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "plain-vlan"}, n); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(n.Status.Conditions, estuaryv1.ConditionBGPPeersEstablished); c != nil {
		t.Errorf("VLAN network has condition %+v", *c)
	}
}
