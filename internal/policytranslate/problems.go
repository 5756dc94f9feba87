package policytranslate

import (
	"errors"
	"net/netip"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Problem is one part of a policy object that a node cannot enforce as
// written: Field names it (e.g. "spec.ingress[0].from[1].ipBlock.cidr"),
// Message says why and what the node does instead.
type Problem struct {
	Field   string
	Message string
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// Kinds of the policy objects an ObjectError names.
const (
	KindNetworkPolicy        = "NetworkPolicy"
	KindClusterNetworkPolicy = "ClusterNetworkPolicy"
)

// ObjectError is what Policy could not enforce as written of one policy
// object: the same Problems NetworkPolicyProblems or ClusterPolicyProblems
// list for it. Policy's error joins one per such object.
type ObjectError struct {
	Kind            string
	Namespace, Name string
	Problems        []Problem
}

func (e *ObjectError) Error() string {
	var b strings.Builder
	b.WriteString(strings.ToLower(e.Kind) + " ")
	if e.Namespace != "" {
		b.WriteString(e.Namespace + "/")
	}
	b.WriteString(e.Name + ": ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// ObjectErrors is the ObjectErrors err holds (Policy's error), in order.
func ObjectErrors(err error) []*ObjectError {
	objs, _ := SplitErrors(err)
	return objs
}

// SplitErrors splits Policy's joined error into the ObjectErrors it holds
// and the errors that name no policy object (an endpoint whose pod is not
// known, ...), each in order.
func SplitErrors(err error) (objs []*ObjectError, rest []error) {
	var walk func(error)
	walk = func(err error) {
		var oe *ObjectError
		switch u := err.(type) { //nolint:errorlint // walks every branch of a join itself
		case nil:
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		default:
			if errors.As(err, &oe) {
				objs = append(objs, oe)
			} else {
				rest = append(rest, err)
			}
		}
	}
	walk(err)
	return objs, rest
}

// NetworkPolicyProblems lists what of np no node can enforce as written,
// in field order; nil when every part of it is enforced. It runs the
// translation Policy runs, over no pods: what depends on pods (a named
// port no pod has) is not a problem of the object.
func NetworkPolicyProblems(np *networkingv1.NetworkPolicy) []Problem {
	ix := newIndex(PolicyInput{})
	for _, p := range ix.networkPolicies([]networkingv1.NetworkPolicy{*np})[np.Namespace] {
		p.translate(ix)
	}
	return ix.problemsOf(objRef{KindNetworkPolicy, np.Namespace, np.Name})
}

// ClusterPolicyProblems lists what of cnp no node can enforce as written
// (unreadable selectors and peers, unsupported peers such as domainNames),
// in field order; nil when every part of it is enforced.
func ClusterPolicyProblems(cnp *npv1beta1.ClusterNetworkPolicy) []Problem {
	ix := newIndex(PolicyInput{})
	ix.clusterPolicies([]npv1beta1.ClusterNetworkPolicy{*cnp})
	return ix.problemsOf(objRef{KindClusterNetworkPolicy, "", cnp.Name})
}

// objRef names a policy object.
type objRef struct{ kind, ns, name string }

// problems collects an object's problems while it is read.
type problems []Problem

func (ps *problems) add(field, msg string) { *ps = append(*ps, Problem{Field: field, Message: msg}) }

// then is ps, each message followed by what the node does instead.
func (ps problems) then(consequence string) problems {
	out := make(problems, len(ps))
	for i, p := range ps {
		out[i] = Problem{Field: p.Field, Message: p.Message + " (" + consequence + ")"}
	}
	return out
}

// report records ps as problems of o.
func (ix *index) report(o objRef, ps problems) {
	if len(ps) == 0 {
		return
	}
	e := ix.objErrs[o]
	if e == nil {
		e = &ObjectError{Kind: o.kind, Namespace: o.ns, Name: o.name}
		ix.objErrs[o] = e
		ix.errs = append(ix.errs, e)
	}
	e.Problems = append(e.Problems, ps...)
}

func (ix *index) problemsOf(o objRef) []Problem {
	if e := ix.objErrs[o]; e != nil {
		return e.Problems
	}
	return nil
}

// unmap reads a prefix of an ipBlock or a network: an IPv4-mapped IPv6
// prefix (inside ::ffff:0:0/96, at least 96 bits) is the IPv4 prefix of
// its last 32 bits, as the address is; any prefix is masked. A shorter
// prefix is an IPv6 prefix whatever its text: after masking it holds no
// mapped address, and it matches IPv6 traffic only.
func unmap(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	p = p.Masked()
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p, nil
}
