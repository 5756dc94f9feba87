package policystatus

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

func bg() context.Context { return context.Background() }

const wait = 30 * time.Second

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(bg(), o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(bg(), o) })
	}
}

// storeRaw writes np into etcd as the API server stores it, bypassing
// validation: a NetworkPolicy the API server now refuses, written before
// its validation tightened.
func storeRaw(t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	np.APIVersion, np.Kind = "networking.k8s.io/v1", "NetworkPolicy"
	np.UID, np.Generation, np.CreationTimestamp = uuid.NewUUID(), 1, metav1.Now()
	value, err := json.Marshal(np)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("/registry/networkpolicies/%s/%s", np.Namespace, np.Name)
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString(value)})
	resp, err := http.Post(etcd+"/v3/kv/put", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("etcd put %s: %v", key, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd put %s: %s", key, resp.Status)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), np) })
	testenv.Eventually(t, "raw NetworkPolicy served", wait, func() error {
		return k8s.Get(bg(), client.ObjectKeyFromObject(np), &networkingv1.NetworkPolicy{})
	})
}

// events are the notes of the PolicyNotEnforced Events regarding the
// NetworkPolicy name.
func events(t *testing.T, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(bg(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == "NetworkPolicy" && e.Reason == ReasonPolicyNotEnforced {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

func gaugeValue(kind string) float64 {
	g, _ := newNotEnforced(nil)
	return testutil.ToFloat64(g.gauge.WithLabelValues(kind))
}

func ipBlockPolicy(name, cidr string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}}}}}
}

// TestNetworkPolicyEvent: a NetworkPolicy with a CIDR no node can read
// (stored before validation refused it) gets one Warning Event naming the
// field, and keeps one however often it is reconciled; a good one gets
// none; fixing the bad one clears the gauge.
func TestNetworkPolicyEvent(t *testing.T) {
	startManager(t)
	good := ipBlockPolicy("good", "10.0.0.0/8")
	create(t, good)
	bad := ipBlockPolicy("bad", "10.0.0.0/33")
	storeRaw(t, bad)
	testenv.Eventually(t, "PolicyNotEnforced Event on bad", wait, func() error {
		notes := events(t, "bad")
		if len(notes) != 1 || !strings.Contains(notes[0], "spec.ingress[0].from[0].ipBlock.cidr") {
			return fmt.Errorf("notes %q, want one naming spec.ingress[0].from[0].ipBlock.cidr", notes)
		}
		if v := gaugeValue("NetworkPolicy"); v != 1 {
			return fmt.Errorf("gauge %v, want 1", v)
		}
		return nil
	})
	// A label change (no new generation) writes no second Event.
	if err := k8s.Patch(bg(), bad, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	fixed := bad.DeepCopy()
	if err := k8s.Get(bg(), client.ObjectKeyFromObject(bad), fixed); err != nil {
		t.Fatal(err)
	}
	if notes := events(t, "good"); len(notes) != 0 {
		t.Errorf("good has Events %q", notes)
	}
	fixed.Spec.Ingress[0].From[0].IPBlock.CIDR = "10.0.0.0/24"
	if err := k8s.Update(bg(), fixed); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "gauge back to 0", wait, func() error {
		if v := gaugeValue("NetworkPolicy"); v != 0 {
			return fmt.Errorf("gauge %v", v)
		}
		return nil
	})
	if notes := events(t, "bad"); len(notes) != 1 {
		t.Errorf("bad has %d Events after the fix, want still 1: %q", len(notes), notes)
	}
}

// waitAccepted waits until obj's Accepted condition has status, for its
// generation, with a message holding contains.
func waitAccepted(t *testing.T, obj client.Object, conds func() []metav1.Condition, status metav1.ConditionStatus, contains string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%s Accepted=%s", obj.GetName(), status), wait, func() error {
		if err := k8s.Get(bg(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		c := meta.FindStatusCondition(conds(), ConditionAccepted)
		if c == nil {
			return fmt.Errorf("no condition in %+v", conds())
		}
		if c.Status != status || c.ObservedGeneration != obj.GetGeneration() || !strings.Contains(c.Message, contains) {
			return fmt.Errorf("condition %+v (generation %d), want %s with %q", *c, obj.GetGeneration(), status, contains)
		}
		return nil
	})
}

func cnp(name string, ingressNS *metav1.LabelSelector) *npv1beta1.ClusterNetworkPolicy {
	return &npv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: npv1beta1.ClusterNetworkPolicySpec{
		Tier: npv1beta1.AdminTier, Priority: 5, Subject: npv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Ingress: []npv1beta1.ClusterNetworkPolicyIngressRule{{Action: "Deny",
			From: []npv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: ingressNS}}}}}}
}

// TestClusterNetworkPolicyCondition: a ClusterNetworkPolicy whose peer's
// selector no node can read is Accepted=False naming the field, a good
// one True; fixing the bad one makes it True for its new generation.
func TestClusterNetworkPolicyCondition(t *testing.T) {
	startManager(t)
	good := cnp("good", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}})
	bad := cnp("bad", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}})
	create(t, good, bad)
	waitAccepted(t, good, func() []metav1.Condition { return good.Status.Conditions }, metav1.ConditionTrue, "")
	waitAccepted(t, bad, func() []metav1.Condition { return bad.Status.Conditions }, metav1.ConditionFalse, "spec.ingress[0].from[0].namespaces")
	if c := meta.FindStatusCondition(bad.Status.Conditions, ConditionAccepted); c.Reason != ReasonNotEnforcedAsWritten {
		t.Errorf("reason %q, want %q", c.Reason, ReasonNotEnforcedAsWritten)
	}
	bad.Spec.Ingress[0].From[0].Namespaces = &metav1.LabelSelector{}
	if err := k8s.Update(bg(), bad); err != nil {
		t.Fatal(err)
	}
	waitAccepted(t, bad, func() []metav1.Condition { return bad.Status.Conditions }, metav1.ConditionTrue, "")
}

// TestAdminNetworkPolicyCondition: an AdminNetworkPolicy with a
// domainNames peer is Accepted=False naming it, and True once the peer is
// gone; a BaselineAdminNetworkPolicy without problems is True.
func TestAdminNetworkPolicyCondition(t *testing.T) {
	startManager(t)
	anp := &v1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "dns"}, Spec: v1alpha1.AdminNetworkPolicySpec{
		Priority: 3, Subject: v1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Egress: []v1alpha1.AdminNetworkPolicyEgressRule{{Action: "Allow", To: []v1alpha1.AdminNetworkPolicyEgressPeer{
			{DomainNames: []v1alpha1.DomainName{"example.com"}}, {Networks: []v1alpha1.CIDR{"192.0.2.0/24"}}}}}}}
	banp := &v1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: v1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Ingress: []v1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Deny",
			From: []v1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}}
	create(t, anp, banp)
	waitAccepted(t, banp, func() []metav1.Condition { return banp.Status.Conditions }, metav1.ConditionTrue, "")
	waitAccepted(t, anp, func() []metav1.Condition { return anp.Status.Conditions }, metav1.ConditionFalse, "spec.egress[0].to[0].domainNames")
	anp.Spec.Egress[0].To = anp.Spec.Egress[0].To[1:]
	if err := k8s.Update(bg(), anp); err != nil {
		t.Fatal(err)
	}
	waitAccepted(t, anp, func() []metav1.Condition { return anp.Status.Conditions }, metav1.ConditionTrue, "")
}

// countingRecorder counts the Events it is asked to record.
type countingRecorder struct{ n int }

func (r *countingRecorder) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) { r.n++ }

// TestNetworkPolicyEventOncePerProblems: reconciling the same bad
// NetworkPolicy again (a resync, a label change) records nothing more;
// once it is deleted and stored again (a new UID), it is recorded anew.
func TestNetworkPolicyEventOncePerProblems(t *testing.T) {
	gauge, err := newNotEnforced(nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &countingRecorder{}
	r := &NetworkPolicyReconciler{Client: k8s, Events: rec, gauge: gauge, emitted: map[types.NamespacedName]string{}}
	bad := ipBlockPolicy("again", "10.0.0.0/33")
	storeRaw(t, bad)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(bad)}
	for range 3 {
		if _, err := r.Reconcile(bg(), req); err != nil {
			t.Fatal(err)
		}
	}
	if rec.n != 1 {
		t.Fatalf("%d Events after 3 reconciles, want 1", rec.n)
	}
	if err := k8s.Delete(bg(), bad); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(bg(), req); err != nil {
		t.Fatal(err)
	}
	storeRaw(t, ipBlockPolicy("again", "10.0.0.0/33"))
	if _, err := r.Reconcile(bg(), req); err != nil {
		t.Fatal(err)
	}
	if rec.n != 2 {
		t.Errorf("%d Events after the policy was stored again, want 2", rec.n)
	}
}
