package cniserver

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reason says, in one word of a fixed set, why a CNI request failed: the
// reason label of estuary_cni_request_errors_total. It never carries a pod,
// container or address, so the label's values stay bounded.
type Reason string

// The reasons a request fails for.
const (
	// ReasonInvalidArgs: the runtime's arguments were refused (a missing
	// container ID, a bad interface name or netns path, an oversized
	// network configuration).
	ReasonInvalidArgs Reason = "invalid_args"
	// ReasonIPAMTimeout: the manager recorded no address for the pod
	// within the daemon's address timeout.
	ReasonIPAMTimeout Reason = "ipam_timeout"
	// ReasonIPAMRefused: the pod's address records are there but cannot be
	// used (a malformed address or MAC, records pinning different MACs).
	ReasonIPAMRefused Reason = "ipam_refused"
	// ReasonBGPSession: the pod's BGP network has no Established session
	// on the node, and the network waits for one.
	ReasonBGPSession Reason = "bgp_session"
	// ReasonNetns: the pod's network namespace could not be opened.
	ReasonNetns Reason = "netns"
	// ReasonDataplane: building or removing the pod's interface, addresses,
	// routes or sysctls failed, or the node's namespace could not be
	// opened.
	ReasonDataplane Reason = "dataplane"
	// ReasonSegmentCheck: an underlay address failed its checks on its VLAN
	// segment (duplicate address probe, gateway check, announcement).
	ReasonSegmentCheck Reason = "segment_check"
	// ReasonStore: the node's endpoint store could not be read or written.
	ReasonStore Reason = "store"
	// ReasonMismatch: a CHECK found no record for the attachment, or one
	// that does not match the request.
	ReasonMismatch Reason = "mismatch"
	// ReasonCanceled: the runtime gave up on the request (its context was
	// canceled or its deadline passed) before it finished.
	ReasonCanceled Reason = "canceled"
	// ReasonInternal: anything else.
	ReasonInternal Reason = "internal"
)

// Reasons lists every Reason, in a fixed order.
var Reasons = []Reason{ReasonInvalidArgs, ReasonIPAMTimeout, ReasonIPAMRefused, ReasonBGPSession, ReasonNetns,
	ReasonDataplane, ReasonSegmentCheck, ReasonStore, ReasonMismatch, ReasonCanceled, ReasonInternal}

// reasonError marks an error with the Reason of the request it fails.
type reasonError struct {
	reason Reason
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// GRPCStatus is the status of the marked error, so that gRPC answers the
// runtime with the code and message it would have without the mark.
func (e *reasonError) GRPCStatus() *status.Status {
	st, _ := status.FromError(e.err)
	return st
}

// WithReason marks err with reason, unless err already carries a Reason (the
// innermost cause knows best: a BGP wait that timed out is bgp_session, not
// ipam_timeout). The message is err's own. A nil err stays nil.
func WithReason(reason Reason, err error) error {
	if err == nil {
		return nil
	}
	var re *reasonError
	if errors.As(err, &re) {
		return err
	}
	return &reasonError{reason: reason, err: err}
}

// ReasonOf classifies err: the Reason it was marked with, else one from its
// gRPC status or context error, else ReasonInternal.
func ReasonOf(err error) Reason {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ReasonCanceled
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.InvalidArgument:
			return ReasonInvalidArgs
		case codes.Canceled, codes.DeadlineExceeded:
			return ReasonCanceled
		case codes.NotFound, codes.FailedPrecondition:
			return ReasonMismatch
		}
	}
	return ReasonInternal
}
