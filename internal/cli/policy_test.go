package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// labelledPod creates a running pod with labels and addresses.
func labelledPod(t *testing.T, ns, name string, lbls map[string]string, hostNetwork bool, ips ...string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.PodSpec{NodeName: "n1", HostNetwork: hostNetwork, Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	create(t, p)
	p.Status.Phase = corev1.PodRunning
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if err := k8s.Status().Update(bg(), p); err != nil {
		t.Fatal(err)
	}
}

// policyFixture creates, in a new namespace, pod web (app=web) selected
// by NetworkPolicy web-ingress (ingress from app=client on TCP 8080) and
// by the Admin-tier ClusterNetworkPolicy <ns>-guard (Deny ingress from
// app=intruder pods), and pod client (app=client), which neither selects.
func policyFixture(t *testing.T) (ns, cnp string) {
	t.Helper()
	ns = namespace(t)
	cnp = ns + "-guard"
	labelledPod(t, ns, "web", map[string]string{"app": "web"}, false, "10.201.0.5")
	labelledPod(t, ns, "client", map[string]string{"app": "client"}, false, "10.201.0.6")
	labelledPod(t, ns, "intruder", map[string]string{"app": "intruder"}, false, "10.201.0.7")
	labelledPod(t, ns, "node-agent", map[string]string{"app": "web"}, true, "10.77.0.11")
	port := intstr.FromInt32(8080)
	create(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-ingress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}},
			}},
		}})
	// The test's client does not know ClusterNetworkPolicies; the plugin's does.
	kc, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	obj := &npv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: cnp},
		Spec: npv1beta1.ClusterNetworkPolicySpec{Tier: npv1beta1.AdminTier, Priority: 10,
			Subject: npv1beta1.ClusterNetworkPolicySubject{Pods: &npv1beta1.NamespacedPod{
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ingress: []npv1beta1.ClusterNetworkPolicyIngressRule{{Action: npv1beta1.ClusterNetworkPolicyRuleActionDeny,
				From: []npv1beta1.ClusterNetworkPolicyIngressPeer{{Pods: &npv1beta1.NamespacedPod{
					PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "intruder"}}}}}}},
		}}
	if err := kc.Create(bg(), obj); err != nil {
		t.Fatalf("create clusternetworkpolicy %s: %v", cnp, err)
	}
	t.Cleanup(func() { _ = kc.Delete(bg(), obj) })
	return ns, cnp
}

// A pod selected by a NetworkPolicy's ingress and an Admin-tier
// ClusterNetworkPolicy lists both, the admin one first, each with why and
// its rules for the pod, and the pod's chains (under the placeholder name:
// the test server has no daemon); the JSON decodes.
func TestPolicyListsSelectingPoliciesAndRules(t *testing.T) {
	ns, cnp := policyFixture(t)
	out, err := run(t, "", "policy", "web", "-n", ns, "-o", "json", "--daemon-namespace", ns)
	if err != nil {
		t.Fatalf("policy web: %v\n%s", err, out)
	}
	var r podPolicy
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("policy -o json: %v\n%s", err, out)
	}
	if len(r.Policies) != 2 {
		t.Fatalf("policies %+v, want the ClusterNetworkPolicy and the NetworkPolicy", r.Policies)
	}
	adm, np := r.Policies[0], r.Policies[1]
	if adm.Kind != kindCNP || adm.Name != cnp || adm.Tier != "Admin" || adm.Priority == nil || *adm.Priority != 10 ||
		!strings.Contains(adm.Why, "podSelector {app=web}") || !slices.Equal(adm.Directions, []string{"ingress"}) {
		t.Errorf("first policy %+v, want %s, tier Admin, priority 10, selected by app=web", adm, cnp)
	}
	if len(adm.Rules) != 1 || adm.Rules[0].ID != "cnp/"+cnp+"/ingress/0" || adm.Rules[0].Action != "Deny" || adm.Rules[0].Tier != "admin" ||
		!slices.Equal(adm.Rules[0].Peers, []string{"10.201.0.7/32"}) {
		t.Errorf("admin rules %+v, want one Deny rule cnp/%s/ingress/0", adm.Rules, cnp)
	}
	if np.Kind != kindNP || np.Namespace != ns || np.Name != "web-ingress" || !strings.Contains(np.Why, "spec.podSelector {app=web}") {
		t.Errorf("second policy %+v, want NetworkPolicy %s/web-ingress", np, ns)
	}
	want := modelRule{ID: "np/" + ns + "/web-ingress/ingress/0", Direction: "ingress", Tier: "networkpolicy", Action: "Allow",
		Peers: []string{"10.201.0.6/32"}, Ports: []string{"tcp/8080"}}
	if len(np.Rules) != 1 || np.Rules[0].ID != want.ID || !slices.Equal(np.Rules[0].Peers, want.Peers) || !slices.Equal(np.Rules[0].Ports, want.Ports) {
		t.Errorf("networkpolicy rules %+v, want %+v", np.Rules, want)
	}
	if len(r.Endpoints) != 1 || r.Endpoints[0].HostVeth != placeholderVeth || !r.Endpoints[0].IngressIsolated || r.Endpoints[0].EgressIsolated {
		t.Fatalf("endpoints %+v, want one, %s, ingress isolated only", r.Endpoints, placeholderVeth)
	}
	var chain []string
	for _, c := range r.Endpoints[0].Chains {
		if c.Name == "i-"+placeholderVeth {
			chain = c.Rules
		}
	}
	joined := strings.Join(chain, "\n")
	for _, w := range []string{"tcp dport 8080", "return", "drop"} {
		if !strings.Contains(joined, w) {
			t.Errorf("ingress chain lacks %q:\n%s", w, joined)
		}
	}
	if len(r.Endpoints[0].Sets) == 0 || !slices.ContainsFunc(r.Endpoints[0].Sets, func(s nftSet) bool {
		return s.Rule == want.ID && slices.Equal(s.Elements, []string{"10.201.0.6"})
	}) {
		t.Errorf("sets %+v, want the peers of %s (10.201.0.6)", r.Endpoints[0].Sets, want.ID)
	}
	for _, w := range []string{"host veth is not known", "does not serve AdminNetworkPolicies"} {
		if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, w) }) {
			t.Errorf("notes %q do not say %q", r.Notes, w)
		}
	}

	text, err := run(t, "", "policy", "pod/web", "-n", ns, "--skip-daemon")
	if err != nil {
		t.Fatalf("policy pod/web: %v\n%s", err, text)
	}
	t.Logf("policy web:\n%s", text)
	requireIn(t, text, "ClusterNetworkPolicy "+cnp+" (tier Admin, priority 10)", "NetworkPolicy "+ns+"/web-ingress",
		"rule np/"+ns+"/web-ingress/ingress/0: ingress Allow from 10.201.0.6/32, ports tcp/8080",
		"rule cnp/"+cnp+"/ingress/0: ingress Deny from 10.201.0.7/32, every port",
		"chain i-unknown-veth {", "what the pod's node computes from the same objects")
	if strings.Index(text, "ClusterNetworkPolicy "+cnp) > strings.Index(text, "NetworkPolicy "+ns+"/web-ingress") {
		t.Errorf("the Admin tier is not listed first:\n%s", text)
	}
}

// A pod no policy selects lists none and has no chain; a missing pod and
// a host-network pod are refused with an error naming them.
func TestPolicyUnselectedAndRefusedPods(t *testing.T) {
	ns, _ := policyFixture(t)
	out, err := run(t, "", "policy", "client", "-n", ns, "-o", "json", "--skip-daemon")
	if err != nil {
		t.Fatalf("policy client: %v\n%s", err, out)
	}
	var r podPolicy
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("policy -o json: %v\n%s", err, out)
	}
	if len(r.Policies) != 0 || len(r.Endpoints) != 1 || len(r.Endpoints[0].Chains) != 0 {
		t.Errorf("unselected pod: policies %+v, endpoints %+v; want none and no chain", r.Policies, r.Endpoints)
	}
	text, err := run(t, "", "policy", "client", "-n", ns, "--skip-daemon")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, text, "no policy selects the pod", "no chain: every packet to and from the pod is admitted")

	for pod, want := range map[string]string{
		"gone":       "policy: pod " + ns + "/gone not found",
		"node-agent": "policy: pod " + ns + "/node-agent is on the host network: no policy applies to it",
	} {
		out, err := run(t, "", "policy", pod, "-n", ns)
		if err == nil || err.Error() != want {
			t.Errorf("policy %s: %v, want %q\n%s", pod, err, want, out)
		}
	}
}

// AdminNetworkPolicies and BaselineAdminNetworkPolicies select as their
// subjects say and are listed in the order the daemon evaluates them: the
// Admin tier by priority (a ClusterNetworkPolicy before an
// AdminNetworkPolicy of the same priority), NetworkPolicies, then the
// Baseline tier, the BaselineAdminNetworkPolicy last.
func TestSelectingAdminPoliciesAndOrder(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"tier": "prod"}}}
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}
	anps := []npv1alpha1.AdminNetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "a-prod"}, Spec: npv1alpha1.AdminNetworkPolicySpec{Priority: 5,
			Subject: npv1alpha1.AdminNetworkPolicySubject{Namespaces: prod}, Ingress: []npv1alpha1.AdminNetworkPolicyIngressRule{{}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-dev"}, Spec: npv1alpha1.AdminNetworkPolicySpec{Priority: 1,
			Subject: npv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}}}}},
	}
	banps := []npv1alpha1.BaselineAdminNetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: npv1alpha1.BaselineAdminNetworkPolicySpec{Subject: npv1alpha1.AdminNetworkPolicySubject{
			Pods: &npv1alpha1.NamespacedPod{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Egress: []npv1alpha1.BaselineAdminNetworkPolicyEgressRule{{}}}}}
	got, bad := selectingAdminPolicies(pod, ns, anps, banps)
	if len(bad) != 0 || len(got) != 2 {
		t.Fatalf("selecting %+v (unreadable %q), want a-prod and default", got, bad)
	}
	got = append(got,
		selecting{Kind: kindCNP, Name: "z-cnp", Tier: "Admin", Priority: ptr.To[int32](5)},
		selecting{Kind: kindNP, Namespace: "shop", Name: "np"},
		selecting{Kind: kindCNP, Name: "base", Tier: "Baseline", Priority: ptr.To[int32](1000)})
	sortSelecting(got)
	var order []string
	for _, p := range got {
		order = append(order, p.Kind+" "+p.Name)
	}
	want := "ClusterNetworkPolicy z-cnp,AdminNetworkPolicy a-prod,NetworkPolicy np,ClusterNetworkPolicy base,BaselineAdminNetworkPolicy default"
	if strings.Join(order, ",") != want {
		t.Errorf("order %v\nwant %s", order, want)
	}
	if got[1].ref() != "cnp/anp:a-prod" || got[4].ref() != "cnp/banp:default" || !slices.Equal(got[4].Directions, []string{"egress"}) {
		t.Errorf("refs %s, %s; directions %v", got[1].ref(), got[4].ref(), got[4].Directions)
	}
}
