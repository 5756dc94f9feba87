package podipam

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestRebuildFailsClosed: a manager that cannot read the Subnets when it
// takes over (here: its user may not list them yet) must not allocate until
// it can, and must then hold every address already recorded. Before, the
// rebuild went on without the subnets, dropped their records, and offered
// the recorded addresses again (each refused by the API server as an
// AddressConflict).
func TestRebuildFailsClosed(t *testing.T) {
	overlay(t, "ov-closed", "10.63.0.0/27")
	ns := newNamespace(t, nil)
	stop := startManager(t)
	recorded := map[netip.Addr]bool{}
	for i := range 5 {
		recorded[addrOf(t, waitInstances(t, ns, newPod(t, ns, fmt.Sprintf("old%d", i)).Name, 1, estuaryv1.IPInstanceBound)[0])] = true
	}
	stop()

	user := "podipam-closed-" + ns
	grant(t, user, "base", []rbacv1.PolicyRule{
		{APIGroups: []string{"", "apps", "events.k8s.io", "coordination.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{estuaryv1.GroupVersion.Group}, Resources: []string{"networks", "networks/status", "subnets/status", "ipinstances"}, Verbs: []string{"*"}},
	}, authzv1.ResourceAttributes{Verb: "list", Resource: "pods"})
	rc := rest.CopyConfig(cfg)
	rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	fresh := newPod(t, ns, "fresh")
	r, _ := startManagerWith(t, testManager{rc: rc})
	eventually(t, "two failed rebuild attempts", func() error {
		if n := testutil.ToFloat64(r.metrics.rebuildFailures); n < 2 {
			return fmt.Errorf("%v failed attempts", n)
		}
		return nil
	})
	if err := r.Ready(); err == nil {
		t.Fatal("the manager reports the allocator rebuilt without reading the subnets")
	}
	if n := len(instancesOf(t, ns, fresh.Name)); n != 0 {
		t.Fatalf("pod %s got %d addresses before the subnets were read", fresh.Name, n)
	}
	if err := hasEvent(ns, fresh.Name, ReasonAllocationFailed); err == nil {
		t.Fatalf("the manager tried to allocate for %s before reading the subnets", fresh.Name)
	}

	grant(t, user, "subnets", []rbacv1.PolicyRule{
		{APIGroups: []string{estuaryv1.GroupVersion.Group}, Resources: []string{"subnets"}, Verbs: []string{"get", "list", "watch"}},
	}, authzv1.ResourceAttributes{Verb: "list", Group: estuaryv1.GroupVersion.Group, Resource: "subnets"})
	got := addrOf(t, waitInstances(t, ns, fresh.Name, 1, estuaryv1.IPInstanceBound)[0])
	if recorded[got] {
		t.Errorf("pod %s got %s, an address recorded for another pod", fresh.Name, got)
	}
	if err := hasEvent(ns, fresh.Name, "AddressConflict"); err == nil {
		t.Errorf("the rebuilt allocator offered a recorded address (AddressConflict on %s)", fresh.Name)
	}
	requireUnique(t, allInstances(t, ns))
	waitUsed(t, "ov-closed-0", 6)
}

// TestOverlappingSubnetOfAnotherNetworkIsNotInstalled: a subnet that
// overlaps another network's (written past the webhook) is kept out of the
// allocator, so its network hands out nothing from it, and it is installed
// with its records once the overlap is gone.
func TestOverlappingSubnetOfAnotherNetworkIsNotInstalled(t *testing.T) {
	overlay(t, "ov-first", "10.64.0.0/28")
	newNetwork(t, "under-dup", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN,
		NetID: ptr.To[int64](0), NodeSelector: map[string]string{"dup": "yes"}},
		map[string]estuaryv1.SubnetSpec{"under-dup-v4": {Network: "under-dup", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.64.0.0/28", Gateway: "10.64.0.14"}}})
	ns := newNamespace(t, nil)
	newNode(t, "dup-node", map[string]string{"dup": "yes"})
	startManager(t)
	waitInstances(t, ns, newPod(t, ns, "first").Name, 1, estuaryv1.IPInstanceBound)
	newPod(t, ns, "dup", onNode("dup-node"), annotated(estuaryv1.AnnotationNetwork, "under-dup"))
	eventually(t, "pod dup refused while its subnet overlaps another network's", func() error {
		return eventNote(ns, "dup", ReasonAllocationFailed, "under-dup")
	})
	if n := len(instancesOf(t, ns, "dup")); n != 0 {
		t.Fatalf("pod dup got %d addresses from a subnet that overlaps network ov-first", n)
	}
	if err := k8s.Delete(bg(), &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "ov-first-0"}}); err != nil {
		t.Fatal(err)
	}
	// ov-first-0 still holds first's address, so it cannot leave the
	// allocator; deleting first releases it and lets the subnet go.
	deletePod(t, podRef(ns, "first"))
	got := waitInstances(t, ns, "dup", 1, estuaryv1.IPInstanceBound)[0]
	if !strings.HasPrefix(got.Spec.Address.IP, "10.64.0.") || got.Spec.Subnet != "under-dup-v4" {
		t.Errorf("pod dup got %s from %s, want an address of under-dup-v4", got.Spec.Address.IP, got.Spec.Subnet)
	}
}

// grant gives user the rules through a ClusterRole and binding named after
// the user and what, removed when the test ends, and waits until the
// authorizer allows user the access probe.
func grant(t *testing.T, user, what string, rules []rbacv1.PolicyRule, probe authzv1.ResourceAttributes) {
	t.Helper()
	name := user + "-" + what
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(bg(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	eventually(t, fmt.Sprintf("%s may %s %s", user, probe.Verb, probe.Resource), func() error {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &probe}}
		if err := k8s.Create(bg(), sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not yet allowed: %s", sar.Status.Reason)
		}
		return nil
	})
}
