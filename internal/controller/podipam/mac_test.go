package podipam

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

func TestStableMAC(t *testing.T) {
	for _, c := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"10.89.0.7"}, "0a:58:0a:59:00:07"},
		{[]string{"fd00:89::1:2:3:4", "10.89.0.7"}, "0a:58:0a:59:00:07"}, // IPv4 first
		{[]string{"fd00:89::a0b:c0d"}, "0a:58:0a:0b:0c:0d"},
		{nil, ""},
	} {
		var addrs []netip.Addr
		for _, a := range c.addrs {
			addrs = append(addrs, netip.MustParseAddr(a))
		}
		if got := stableMAC(addrs); got != c.want {
			t.Errorf("stableMAC(%v) = %q, want %q", c.addrs, got, c.want)
		}
	}
}

// Every kept address comes back with its MAC: a retaining Deployment's, a
// reserved one's, a StatefulSet's without mac-pool; a pod whose addresses
// are never kept records none.
func TestKeptAddressesComeBackWithTheirMAC(t *testing.T) {
	overlay(t, "ov-mac", "10.89.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")

	web := newPod(t, ns, "web-a-0", deployment(t, ns, "web", "a"), retain, onNetwork("ov-mac"))
	first := waitInstances(t, ns, web.Name, 1, estuaryv1.IPInstanceBound)[0]
	if first.Spec.Address.MAC != derivedMAC(t, first) {
		t.Fatalf("a retaining pod's address %s has MAC %q, want %s", first.Name, first.Spec.Address.MAC, derivedMAC(t, first))
	}
	deletePod(t, web)
	waitOwned(t, ns, "Deployment", "web", 1, estuaryv1.IPInstanceRetained)
	web2 := newPod(t, ns, "web-b-0", deployment(t, ns, "web", "b"), retain, onNetwork("ov-mac"), onNode("node-b"))
	if again := waitInstances(t, ns, web2.Name, 1, estuaryv1.IPInstanceBound)[0]; again.Name != first.Name || again.Spec.Address.MAC != first.Spec.Address.MAC {
		t.Fatalf("the Deployment's next pod got %s MAC %q, want %s MAC %s", again.Name, again.Spec.Address.MAC, first.Name, first.Spec.Address.MAC)
	}

	reserve(t, ns, "ov-mac", "10.89.0.200/24", "Deployment", "vip")
	vip := newPod(t, ns, "vip-a-0", deployment(t, ns, "vip", "a"), onNetwork("ov-mac"))
	resv := waitInstances(t, ns, vip.Name, 1, estuaryv1.IPInstanceBound)[0]
	if resv.Name != "10.89.0.200" || resv.Spec.Address.MAC != "0a:58:0a:59:00:c8" {
		t.Fatalf("the reservation's pod got %s MAC %q, want 10.89.0.200 MAC 0a:58:0a:59:00:c8", resv.Name, resv.Spec.Address.MAC)
	}
	deletePod(t, vip)
	if back := waitOwned(t, ns, "Deployment", "vip", 1, estuaryv1.IPInstanceReserved)[0]; back.Spec.Address.MAC != resv.Spec.Address.MAC {
		t.Fatalf("the reservation lost its MAC: %q", back.Spec.Address.MAC)
	}
	vip2 := newPod(t, ns, "vip-b-0", deployment(t, ns, "vip", "b"), onNetwork("ov-mac"))
	if again := waitInstances(t, ns, vip2.Name, 1, estuaryv1.IPInstanceBound)[0]; again.Spec.Address.MAC != resv.Spec.Address.MAC {
		t.Fatalf("the reservation came back with MAC %q, want %s", again.Spec.Address.MAC, resv.Spec.Address.MAC)
	}

	sts := newStatefulSet(t, ns, "db", 1, nil)
	newPod(t, ns, "db-0", ownedBy(sts), onNetwork("ov-mac"))
	db := waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceBound)[0]
	if db.Spec.Address.MAC != derivedMAC(t, db) {
		t.Fatalf("a StatefulSet pod's address %s has MAC %q, want %s", db.Name, db.Spec.Address.MAC, derivedMAC(t, db))
	}
	deletePod(t, podRef(ns, "db-0"))
	waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceRetained)
	newPod(t, ns, "db-0", ownedBy(sts), onNetwork("ov-mac"), onNode("node-c"))
	if again := waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceBound)[0]; again.Name != db.Name || again.Spec.Address.MAC != db.Spec.Address.MAC {
		t.Fatalf("re-created db-0 got %s MAC %q, want %s MAC %s", again.Name, again.Spec.Address.MAC, db.Name, db.Spec.Address.MAC)
	}

	plain := newPod(t, ns, "plain", onNetwork("ov-mac"))
	if ipi := waitInstances(t, ns, plain.Name, 1, estuaryv1.IPInstanceBound)[0]; ipi.Spec.Address.MAC != "" {
		t.Fatalf("a pod whose address is never kept got MAC %q recorded", ipi.Spec.Address.MAC)
	}
}

func TestSupersedes(t *testing.T) {
	at := func(sec int64, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Unix(sec, 0), Labels: labels}}
	}
	target := map[string]string{labelMigrationTarget: "m-1"}
	for _, c := range []struct {
		name        string
		pod, holder *corev1.Pod
		want        bool
	}{
		{"a newer pod", at(2, nil), at(1, nil), true},
		{"an older pod", at(1, nil), at(2, nil), false},
		{"the same second: the holder keeps", at(1, nil), at(1, nil), false},
		{"the same second: a migration target takes", at(1, target), at(1, nil), true},
		{"the same second: both targets, the holder keeps", at(1, target), at(1, target), false},
	} {
		if got := supersedes(c.pod, c.holder); got != c.want {
			t.Errorf("%s: supersedes = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMachineRetentionFollowsTheClusterDefault(t *testing.T) {
	yes, no := true, false
	hour := time.Hour
	for _, c := range []struct {
		name          string
		fx            netmodel.Fixed
		keepByDefault bool
		kept          bool
	}{
		{"unset, default on", netmodel.Fixed{}, true, true},
		{"unset, default off", netmodel.Fixed{}, false, false},
		{"true, default off", netmodel.Fixed{Retain: &yes}, false, true},
		{"false, default on", netmodel.Fixed{Retain: &no}, true, false},
		{"ttl, default on", netmodel.Fixed{TTL: &hour, TTLSet: true}, true, true},
	} {
		got := machineRetention(&c.fx, c.keepByDefault)
		if (got != nil) != c.kept {
			t.Errorf("%s: kept = %v, want %v", c.name, got != nil, c.kept)
		}
		if got != nil && c.fx.TTLSet && (got.ttl == nil || *got.ttl != hour) {
			t.Errorf("%s: ttl = %v, want %v", c.name, got.ttl, hour)
		}
	}
}
