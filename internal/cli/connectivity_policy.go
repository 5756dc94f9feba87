package cli

// The policy paths (connectivity_plan.go, policyPaths) put their
// NetworkPolicies in place step by step, as the paths come: before the
// default-deny policy, the client must reach the target (otherwise a
// denial would prove nothing); each policy is created once, and a step
// that could not be taken fails every path that needs it.

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// policyPath puts the path's policies in place and probes it.
func (r *connRun) policyPath(ctx context.Context, base connResult, src *corev1.Pod, path probePath) []connResult {
	dst, why := r.pod(path.To)
	if dst == nil {
		base.Status, base.To, base.Reason = statusFail, path.To, why
		return []connResult{base}
	}
	if err := r.applyPolicy(ctx, src, dst, path.Policy); err != nil {
		base.Status, base.To, base.Reason = statusFail, describe(dst), err.Error()
		return []connResult{base}
	}
	return r.toPod(ctx, base, src, dst, path)
}

// applyPolicy takes the policy steps up to step that are not in place.
func (r *connRun) applyPolicy(ctx context.Context, src, dst *corev1.Pod, step policyStep) error {
	for r.policy < step && r.policyErr == nil {
		next := r.policy + 1
		switch next {
		case policyDeny:
			r.policyErr = r.reachableBeforePolicy(ctx, src, dst)
			if r.policyErr == nil {
				r.policyErr = r.createPolicy(ctx, denyIngressObject(r.plan.Namespace))
			}
		case policyAllow:
			r.policyErr = r.createPolicy(ctx, allowClientObject(r.plan.Namespace))
		}
		if r.policyErr == nil {
			r.policy = next
		}
	}
	return r.policyErr
}

// reachableBeforePolicy checks src reaches dst while no policy selects it.
func (r *connRun) reachableBeforePolicy(ctx context.Context, src, dst *corev1.Pod) error {
	fams := commonFamilies(src, dst)
	if len(fams) == 0 {
		return errors.New("no address family in common")
	}
	t := target{Host: addrOf(dst, fams[0]), Port: netexecPort, URL: "/clientip", Expect: expectClientIP, Want: []string{addrOf(src, fams[0])}}
	if _, _, err := probeUntil(ctx, r.exec, src, t, r.f.probeTimeout, r.f.pathTimeout, r.f.interval); err != nil {
		return fmt.Errorf("not reachable before any policy, so a denial would prove nothing: %w", err)
	}
	return nil
}

// createPolicy creates a NetworkPolicy of the test.
func (r *connRun) createPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) error {
	r.note("creating NetworkPolicy %s/%s", np.Namespace, np.Name)
	if err := r.k.Create(ctx, np); err != nil {
		return fmt.Errorf("create NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
	}
	return nil
}
