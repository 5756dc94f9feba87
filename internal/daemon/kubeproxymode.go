package daemon

// What the daemon publishes about kube-proxy's mode while it enforces
// policy. kube-proxy's IPVS mode delivers a Service connection to a
// backend on the same node from the output hook, which the policy table
// does not filter (a pod cannot block its own node), so that backend's
// ingress policy is skipped: the daemon says so in its node status (a
// problem `kubectl estuary status` shows), in a Warning Event on the Node
// when it appears, and in its log (datapath/proxymode.go learns the mode).

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
)

// ReasonPolicyBypassedByIPVS is the reason of the Event saying kube-proxy's
// IPVS mode bypasses ingress policy on the node.
const ReasonPolicyBypassedByIPVS = "PolicyBypassedByIPVS"

// ipvsProblem is the node status problem of kube-proxy's IPVS mode.
const ipvsProblem = "kube-proxy runs in IPVS mode: a Service connection from a pod to a backend on the same node " +
	"leaves through the node's output hook, never its forward hook, so the backend's ingress policy does not judge it; " +
	"estuary supports policy with kube-proxy's iptables mode (docs/networkpolicy.md, Limits)"

// kubeProxyModeFunc learns kube-proxy's mode (datapath.ProxyModeDetector).
type kubeProxyModeFunc func(context.Context) (string, error)

// proxyModeOf is what the reporter asks kube-proxy's mode with: nil (not
// asked) when the daemon enforces no policy.
func proxyModeOf(cfg Config) kubeProxyModeFunc {
	if !cfg.NetworkPolicy {
		return nil
	}
	return datapath.ProxyModeDetector{}.Detect
}

// policyStatus is the policy part of the daemon's status; nil when the
// daemon enforces no policy.
func (r *statusReporter) policyStatus(ctx context.Context) *estuaryv1.NodePolicyStatus {
	if r.kubeProxyMode == nil {
		return nil
	}
	mode, err := r.kubeProxyMode(ctx)
	if err != nil {
		log.V(1).Info("kube-proxy's mode not learnt", "error", err.Error())
	}
	st := &estuaryv1.NodePolicyStatus{KubeProxyMode: mode}
	if mode == datapath.ProxyModeIPVS {
		st.Problem = ipvsProblem
	}
	return st
}

// policyTransitions records the Warning when a policy problem appears or
// changes from prev (nil: nothing known) to st, and logs it when this
// daemon has not logged it yet (own: its previous status, r.last, nil at
// its first pass).
func (r *statusReporter) policyTransitions(prev, own *estuaryv1.NodeDaemonStatus, st estuaryv1.NodeDaemonStatus) {
	p := problemOf(st)
	if p == "" {
		return
	}
	if own == nil || problemOf(*own) != p {
		log.Info("network policy is not enforced on all of this node's traffic", "problem", p)
	}
	if prev == nil || problemOf(*prev) != p {
		r.events.Record(corev1.EventTypeWarning, ReasonPolicyBypassedByIPVS, "EnforcePolicy", p)
	}
}

func problemOf(st estuaryv1.NodeDaemonStatus) string {
	if st.Policy == nil {
		return ""
	}
	return st.Policy.Problem
}
