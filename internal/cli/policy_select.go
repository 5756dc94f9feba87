package cli

// Which policies select a pod, and why: the label selectors of their
// subjects read against the pod's and its namespace's labels, as the
// daemon reads them (a selector that cannot be read selects nobody; the
// daemon skips that policy and reports it).

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Policy kinds as `policy POD` prints them.
const (
	kindNP   = "NetworkPolicy"
	kindCNP  = "ClusterNetworkPolicy"
	kindANP  = "AdminNetworkPolicy"
	kindBANP = "BaselineAdminNetworkPolicy"
)

// selecting is one policy that selects the pod.
type selecting struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Tier and Priority are a ClusterNetworkPolicy's.
	Tier     string `json:"tier,omitempty"`
	Priority *int32 `json:"priority,omitempty"`
	// Directions are those it has a say in: "ingress", "egress".
	Directions []string `json:"directions"`
	// Why says which selector matched which labels.
	Why string `json:"why"`
	// Rules are its rules for this pod as the daemon computes them.
	Rules []modelRule `json:"rules"`
	// Problems are what of the object no node enforces as written.
	Problems []string `json:"problems,omitempty"`
}

// ref is the policy as its rule IDs name it: "np/<ns>/<name>",
// "cnp/<name>".
func (s selecting) ref() string {
	switch s.Kind {
	case kindNP:
		return "np/" + s.Namespace + "/" + s.Name
	case kindANP:
		return "cnp/anp:" + s.Name
	case kindBANP:
		return "cnp/banp:" + s.Name
	}
	return "cnp/" + s.Name
}

// tierOrder orders policies as they are evaluated: Admin, NetworkPolicy,
// Baseline.
func (s selecting) tierOrder() int {
	switch {
	case s.Kind == kindNP:
		return 1
	case s.Tier == string(npv1beta1.BaselineTier):
		return 2
	}
	return 0
}

// priorityOrder orders policies of a tier as policytranslate does: by priority
// (a BaselineAdminNetworkPolicy, which has none, after every other), then
// ClusterNetworkPolicies before converted AdminNetworkPolicies.
func (s selecting) priorityOrder() (int32, int) {
	p := int32(1001)
	if s.Priority != nil {
		p = *s.Priority
	}
	if s.Kind == kindCNP || s.Kind == kindNP {
		return p, 0
	}
	return p, 1
}

// selectorText is a label selector as kubectl prints one; the empty one
// selects everything.
func selectorText(sel labels.Selector) string {
	if sel.Empty() {
		return "{} (everything)"
	}
	return "{" + sel.String() + "}"
}

// selectingNetworkPolicies are the NetworkPolicies of pod's namespace that
// select it; unreadable lists those whose podSelector cannot be read.
func selectingNetworkPolicies(pod *corev1.Pod, nps []networkingv1.NetworkPolicy) (out []selecting, unreadable []string) {
	for i := range nps {
		np := &nps[i]
		if np.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			unreadable = append(unreadable, fmt.Sprintf("networkpolicy %s/%s: spec.podSelector: %v (the daemon skips the policy)", np.Namespace, np.Name, err))
			continue
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, selecting{Kind: kindNP, Namespace: np.Namespace, Name: np.Name, Directions: npDirections(np),
			Why: "spec.podSelector " + selectorText(sel) + " matches the pod's labels"})
	}
	return out, unreadable
}

// npDirections are the directions a NetworkPolicy isolates: its
// policyTypes, or ingress, and egress when it has egress rules.
func npDirections(np *networkingv1.NetworkPolicy) []string {
	var in, eg bool
	if len(np.Spec.PolicyTypes) == 0 {
		in, eg = true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		in = in || t == networkingv1.PolicyTypeIngress
		eg = eg || t == networkingv1.PolicyTypeEgress
	}
	return directionsOf(in, eg)
}

func directionsOf(in, eg bool) []string {
	out := []string{}
	if in {
		out = append(out, "ingress")
	}
	if eg {
		out = append(out, "egress")
	}
	return out
}

// selectingClusterPolicies are the ClusterNetworkPolicies whose subject
// selects pod in namespace ns.
func selectingClusterPolicies(pod *corev1.Pod, ns *corev1.Namespace, cnps []npv1beta1.ClusterNetworkPolicy) (out []selecting, unreadable []string) {
	for i := range cnps {
		cnp := &cnps[i]
		why, err := cnpSubjectWhy(cnp.Spec.Subject, pod, ns)
		if err != nil {
			unreadable = append(unreadable, fmt.Sprintf("clusternetworkpolicy %s: %v", cnp.Name, err))
			continue
		}
		if why == "" {
			continue
		}
		out = append(out, selecting{Kind: kindCNP, Name: cnp.Name, Tier: string(cnp.Spec.Tier), Priority: &cnp.Spec.Priority,
			Directions: directionsOf(len(cnp.Spec.Ingress) > 0, len(cnp.Spec.Egress) > 0), Why: why})
	}
	return out, unreadable
}

// selectingAdminPolicies are the v1alpha1 AdminNetworkPolicies and
// BaselineAdminNetworkPolicies whose subject selects pod in namespace ns;
// the daemon enforces each as the ClusterNetworkPolicy it converts to.
func selectingAdminPolicies(pod *corev1.Pod, ns *corev1.Namespace, anps []npv1alpha1.AdminNetworkPolicy,
	banps []npv1alpha1.BaselineAdminNetworkPolicy) (out []selecting, unreadable []string) {
	add := func(kind, name, tier string, prio *int32, subject npv1alpha1.AdminNetworkPolicySubject, in, eg bool) {
		why, err := cnpSubjectWhy(subjectOf(subject), pod, ns)
		switch {
		case err != nil:
			unreadable = append(unreadable, fmt.Sprintf("%s %s: %v", strings.ToLower(kind), name, err))
		case why != "":
			out = append(out, selecting{Kind: kind, Name: name, Tier: tier, Priority: prio, Directions: directionsOf(in, eg), Why: why})
		}
	}
	for i := range anps {
		a := &anps[i]
		add(kindANP, a.Name, string(npv1beta1.AdminTier), &a.Spec.Priority, a.Spec.Subject, len(a.Spec.Ingress) > 0, len(a.Spec.Egress) > 0)
	}
	for i := range banps {
		b := &banps[i]
		add(kindBANP, b.Name, string(npv1beta1.BaselineTier), nil, b.Spec.Subject, len(b.Spec.Ingress) > 0, len(b.Spec.Egress) > 0)
	}
	return out, unreadable
}

// subjectOf is a v1alpha1 subject as the v1beta1 one it converts to.
func subjectOf(s npv1alpha1.AdminNetworkPolicySubject) npv1beta1.ClusterNetworkPolicySubject {
	out := npv1beta1.ClusterNetworkPolicySubject{Namespaces: s.Namespaces}
	if s.Pods != nil {
		out.Pods = &npv1beta1.NamespacedPod{NamespaceSelector: s.Pods.NamespaceSelector, PodSelector: s.Pods.PodSelector}
	}
	return out
}

// cnpSubjectWhy says which of subject's selectors matched pod and its
// namespace, "" when the subject does not select the pod.
func cnpSubjectWhy(subject npv1beta1.ClusterNetworkPolicySubject, pod *corev1.Pod, ns *corev1.Namespace) (string, error) {
	nsLabels := labels.Set(ns.Labels)
	switch {
	case subject.Namespaces != nil:
		sel, err := metav1.LabelSelectorAsSelector(subject.Namespaces)
		if err != nil {
			return "", fmt.Errorf("spec.subject.namespaces: %w", err)
		}
		if !sel.Matches(nsLabels) {
			return "", nil
		}
		return fmt.Sprintf("spec.subject.namespaces %s matches namespace %s's labels", selectorText(sel), ns.Name), nil
	case subject.Pods != nil:
		nsSel, err := metav1.LabelSelectorAsSelector(&subject.Pods.NamespaceSelector)
		if err != nil {
			return "", fmt.Errorf("spec.subject.pods.namespaceSelector: %w", err)
		}
		podSel, err := metav1.LabelSelectorAsSelector(&subject.Pods.PodSelector)
		if err != nil {
			return "", fmt.Errorf("spec.subject.pods.podSelector: %w", err)
		}
		if !nsSel.Matches(nsLabels) || !podSel.Matches(labels.Set(pod.Labels)) {
			return "", nil
		}
		return fmt.Sprintf("spec.subject.pods.namespaceSelector %s matches namespace %s's labels and podSelector %s the pod's",
			selectorText(nsSel), ns.Name, selectorText(podSel)), nil
	}
	return "", nil
}

// sortSelecting orders policies as they are evaluated: the Admin tier by
// priority then name, the NetworkPolicies by name, the Baseline tier by
// priority then name.
func sortSelecting(ps []selecting) {
	slices.SortFunc(ps, func(a, b selecting) int {
		if c := cmp.Compare(a.tierOrder(), b.tierOrder()); c != 0 {
			return c
		}
		ap, ak := a.priorityOrder()
		bp, bk := b.priorityOrder()
		if c := cmp.Compare(ap, bp); c != 0 {
			return c
		}
		if c := cmp.Compare(ak, bk); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
