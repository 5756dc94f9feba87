package cli

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The policy paths come last, against a target on node B: the client is
// denied once the default-deny policy is in place, admitted once the allow
// policy is, and the same-node probe stays denied; --skip-policy leaves
// the target out and says so in one skipped path.
func TestPlanPolicyPaths(t *testing.T) {
	in := planInput{Namespace: "probe-ns", Nodes: []corev1.Node{readyNode("n1"), readyNode("n2")}}
	p, err := makePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Pods, probePod{Name: probePolicyTarget, Node: "n2"}) {
		t.Errorf("pods %+v lack the policy target on n2", p.Pods)
	}
	n := len(p.Paths)
	want := []probePath{
		{Kind: pathPolicyDeny, From: probeClient, To: probePolicyTarget, Policy: policyDeny, Expect: expectDenied},
		{Kind: pathPolicyAllow, From: probeClient, To: probePolicyTarget, Policy: policyAllow, Expect: expectClientIP},
		{Kind: pathPolicyDeny, From: probeSame, To: probePolicyTarget, Policy: policyAllow, Expect: expectDenied},
	}
	if got := p.Paths[n-3:]; !slices.Equal(got, want) {
		t.Errorf("last paths %+v, want %+v", got, want)
	}
	for _, path := range p.Paths[:n-3] {
		if path.Policy != policyNone || path.To == probePolicyTarget {
			t.Errorf("path %+v before the policy paths needs a policy or the target", path)
		}
	}

	in.SkipPolicy = true
	p, err = makePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	last := p.Paths[len(p.Paths)-1]
	if last.Kind != pathPolicyNone || last.Skip != "--skip-policy" || slices.ContainsFunc(p.Pods, func(pp probePod) bool { return pp.Name == probePolicyTarget }) {
		t.Errorf("--skip-policy: last path %+v, pods %+v; want one skipped policy path and no target", last, p.Pods)
	}
}

// The default-deny policy selects the target only and admits nothing; the
// allow policy admits the client only, on netexec's port over TCP.
func TestPolicyPathObjects(t *testing.T) {
	probeLabels := func(role string) labels.Set { return labels.Set(connLabels(role)) }
	deny, allow := denyIngressObject("probe-ns"), allowClientObject("probe-ns")
	for _, np := range []struct {
		name string
		sel  metav1.LabelSelector
	}{{deny.Name, deny.Spec.PodSelector}, {allow.Name, allow.Spec.PodSelector}} {
		s, err := metav1.LabelSelectorAsSelector(&np.sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, role := range []string{probeClient, probeSame, probeOther, probeRetain} {
			if s.Matches(probeLabels(role)) {
				t.Errorf("%s selects the %s probe", np.name, role)
			}
		}
		if !s.Matches(probeLabels(probePolicyTarget)) {
			t.Errorf("%s does not select the policy target", np.name)
		}
	}
	if len(deny.Spec.Ingress) != 0 || !slices.Equal(deny.Spec.PolicyTypes, allow.Spec.PolicyTypes) || len(deny.Spec.PolicyTypes) != 1 {
		t.Errorf("deny policy %+v: want ingress only, no rule", deny.Spec)
	}
	if len(allow.Spec.Ingress) != 1 || len(allow.Spec.Ingress[0].From) != 1 || len(allow.Spec.Ingress[0].Ports) != 1 {
		t.Fatalf("allow policy %+v: want one rule, one peer, one port", allow.Spec)
	}
	from, _ := metav1.LabelSelectorAsSelector(allow.Spec.Ingress[0].From[0].PodSelector)
	if !from.Matches(probeLabels(probeClient)) || from.Matches(probeLabels(probeSame)) {
		t.Errorf("allow policy admits %s, want the client only", from)
	}
	port := allow.Spec.Ingress[0].Ports[0]
	if *port.Protocol != corev1.ProtocolTCP || port.Port.IntValue() != netexecPort {
		t.Errorf("allow policy port %v/%v, want TCP %d", *port.Protocol, port.Port, netexecPort)
	}
}

// A denial passes when no TCP connection was made and fails when one was.
func TestJudgeDenied(t *testing.T) {
	den := target{Expect: expectDenied}
	if got := judgeTCP(den, curlResult{Exit: 28, Err: "curl: (28) Connection timed out"}); got != "" {
		t.Errorf("timed out: %q, want a pass", got)
	}
	if got := judgeTCP(den, curlResult{Connect: 1, Code: 200}); got != "connected (HTTP 200): no policy dropped it" {
		t.Errorf("connected: %q", got)
	}
}
