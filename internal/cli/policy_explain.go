package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// explainPolicy makes the report of pod: the policies that select it,
// each with its rules for the pod, and the pod's chains.
func explainPolicy(pod *corev1.Pod, objs policyObjects, eps []podEndpoint) (podPolicy, error) {
	r := podPolicy{Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName, Addresses: []string{},
		Policies: []selecting{}, Endpoints: []endpointChains{}}
	for _, ip := range pod.Status.PodIPs {
		r.Addresses = append(r.Addresses, ip.IP)
	}
	var ns *corev1.Namespace
	for i := range objs.namespaces {
		if objs.namespaces[i].Name == pod.Namespace {
			ns = &objs.namespaces[i]
		}
	}
	if ns == nil {
		return r, fmt.Errorf("namespace %s not found", pod.Namespace)
	}
	nps, bad := selectingNetworkPolicies(pod, objs.nps)
	cnps, badC := selectingClusterPolicies(pod, ns, objs.cnps)
	anps, badA := selectingAdminPolicies(pod, ns, objs.anps, objs.banps)
	r.Policies = append(append(nps, cnps...), anps...)
	sortSelecting(r.Policies)
	r.Problems = append(append(bad, badC...), badA...)

	c := compilePolicy(objs, pod.Namespace, pod.Name, eps)
	var rules []modelRule
	for _, e := range c.node.Endpoints {
		rules = append(rules, modelRules(e)...)
		r.Endpoints = append(r.Endpoints, chainsOf(e, c.rules))
	}
	seen := map[objKey]bool{}
	for i := range r.Policies {
		p := &r.Policies[i]
		p.Rules = rulesOf(p.ref(), rules)
		k := objKey{kind: p.Kind, ns: p.Namespace, name: p.Name}
		p.Problems = c.objectProblems[k]
		seen[k] = true
	}
	var others []string
	for k, ps := range c.objectProblems {
		if !seen[k] {
			for _, p := range ps {
				others = append(others, fmt.Sprintf("%s %s: %s", strings.ToLower(k.kind), strings.TrimPrefix(k.ns+"/"+k.name, "/"), p))
			}
		}
	}
	slices.Sort(others)
	r.Problems = append(r.Problems, others...)
	r.Problems = append(r.Problems, c.otherErrors...)
	return r, nil
}

// writePodPolicy prints the report as text.
func writePodPolicy(w io.Writer, r podPolicy) error {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s on node %s, addresses %s\n", r.Pod, orDash(r.Node), orDash(strings.Join(r.Addresses, ", ")))
	if len(r.Policies) == 0 {
		b.WriteString("\nno policy selects the pod: everything to and from it is admitted\n")
	}
	for _, p := range r.Policies {
		b.WriteString("\n" + policyHeading(p) + "\n")
		fmt.Fprintf(&b, "  why: %s\n", p.Why)
		fmt.Fprintf(&b, "  directions: %s\n", orDash(strings.Join(p.Directions, ", ")))
		for _, rule := range p.Rules {
			word := "from"
			if rule.Direction == "egress" {
				word = "to"
			}
			fmt.Fprintf(&b, "  rule %s: %s %s %s %s%s\n", rule.ID, rule.Direction, rule.Action, word,
				orDash(strings.Join(rule.Peers, ", ")), portsText(rule.Ports))
		}
		for _, pr := range p.Problems {
			fmt.Fprintf(&b, "  not enforced as written: %s\n", pr)
		}
	}
	for _, e := range r.Endpoints {
		writeChains(&b, e)
	}
	if len(r.Endpoints) > 0 {
		b.WriteString("\n(what the pod's node computes from the same objects: policytranslate.Policy and policy.Compile, as the daemon runs them)\n")
	}
	if len(r.Problems) > 0 {
		b.WriteString("\nproblems:\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func policyHeading(p selecting) string {
	switch {
	case p.Kind == kindNP:
		return fmt.Sprintf("NetworkPolicy %s/%s", p.Namespace, p.Name)
	case p.Priority == nil:
		return fmt.Sprintf("%s %s (tier %s)", p.Kind, p.Name, p.Tier)
	}
	return fmt.Sprintf("%s %s (tier %s, priority %d)", p.Kind, p.Name, p.Tier, *p.Priority)
}

func portsText(ports []string) string {
	if len(ports) == 0 {
		return ", every port"
	}
	return ", ports " + strings.Join(ports, " ")
}

// writeChains prints an interface's chains and sets as nft lists them.
func writeChains(b *strings.Builder, e endpointChains) {
	iso := func(yes bool) string {
		if yes {
			return "isolated"
		}
		return "not isolated"
	}
	fmt.Fprintf(b, "\nhost veth %s (%s): ingress %s, egress %s\n", e.HostVeth, strings.Join(e.Addrs, ", "),
		iso(e.IngressIsolated), iso(e.EgressIsolated))
	if len(e.Chains) == 0 {
		b.WriteString("  no chain: every packet to and from the pod is admitted\n")
	}
	for _, c := range e.Chains {
		fmt.Fprintf(b, "  chain %s {\n", c.Name)
		for _, r := range c.Rules {
			fmt.Fprintf(b, "    %s\n", r)
		}
		b.WriteString("  }\n")
	}
	for _, s := range e.Sets {
		fmt.Fprintf(b, "  set %s { # peers of rule %s\n    elements = { %s }\n  }\n", s.Name, orDash(s.Rule), strings.Join(s.Elements, ", "))
	}
}
