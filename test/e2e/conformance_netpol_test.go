//go:build lab

package e2e_test

import (
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/conformance"
)

// networkPolicySubset are the upstream NetworkPolicy specs (the Netpol suite
// of e2e.test) that make test runs on the e2e lab, one per kind of rule: a
// namespace's default deny of ingress over TCP and over UDP, ingress allowed
// by pod selector, by namespace selector and on a named port, egress denied
// by pod selector, and egress to an ipBlock less its except. Each probes
// every pair of its two to four pods through their Services. make
// conformance-netpol runs every one that fits the lab (docs/conformance.md).
var networkPolicySubset = []string{
	"NetworkPolicy between server and client should support a 'default-deny-ingress' policy",
	"NetworkPolicy between server and client should enforce policy to allow traffic from pods within server namespace based on PodSelector",
	"NetworkPolicy between server and client should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
	"NetworkPolicy between server and client should allow ingress access on one named port",
	"NetworkPolicy between server and client should deny egress from pods based on PodSelector",
	"NetworkPolicy between server and client should enforce except clause while egress access to server in CIDR block",
	"[LinuxOnly] NetworkPolicy between server and client using UDP should support a 'default-deny-ingress' policy",
}

// TestUpstreamNetworkPolicySubset runs networkPolicySubset with the pinned
// Kubernetes version's own e2e.test against the e2e lab, two processes at
// once (each spec works in namespaces of its own), and requires every one
// of them to run and pass.
func TestUpstreamNetworkPolicySubset(t *testing.T) {
	e := needLab(t)
	e.runUpstream(t, conformance.NetworkPolicy+" ", networkPolicySubset, ` \[Feature:NetworkPolicy\]`,
		conformance.SkipExpression(conformance.Active(conformance.NetworkPolicyExclusions)), 2, 15*time.Minute)
}
