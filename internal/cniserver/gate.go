package cniserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// PolicyGate admits a new endpoint to the node's network policy: Admit
// returns once the endpoint's verdicts are in the kernel (the pod's own,
// or a pending one that isolates it until they are computed), with the
// outcome of a small fixed set that says which (the outcome label of
// estuary_cni_add_policy_wait_seconds). Add calls it after the endpoint
// is stored and before it replies, so a pod a policy selects is isolated
// before its containers start; an error fails the ADD, which is rolled
// back and retried by the runtime. The daemon's policy part is one
// (datapath.PolicyPart); nil when the node enforces no policy.
type PolicyGate interface {
	Admit(ctx context.Context, ep endpointstore.Endpoint) (outcome string, err error)
}

// admit passes ep through the gate, if there is one, and records the wait.
func (s *Server) admit(ctx context.Context, ep endpointstore.Endpoint) error {
	if s.gate == nil {
		return nil
	}
	start := time.Now()
	outcome, err := s.gate.Admit(ctx, ep)
	if err != nil {
		outcome = outcomeError
	}
	s.metrics.observeGate(outcome, start)
	if err == nil {
		return nil
	}
	reason := ReasonDataplane
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		reason = ReasonCanceled
	}
	return WithReason(reason, fmt.Errorf("network policy: %w", err))
}
