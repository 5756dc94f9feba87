// Package bgpstatus holds what a node's BGP speaker observes of its peers:
// each peer's session state and counters. It is a leaf, so that the speaker
// (internal/daemon/bgp), the data-path loop that publishes the states and the
// CNI backend's address waiter that gates an ADD on an Established session
// (internal/cnibackend/ipwait) share one type without importing each other.
package bgpstatus

import (
	"net/netip"
	"time"
)

// SessionState is a BGP session's finite state machine state (RFC 4271).
type SessionState string

// Session states.
const (
	StateUnknown     SessionState = "Unknown"
	StateIdle        SessionState = "Idle"
	StateConnect     SessionState = "Connect"
	StateActive      SessionState = "Active"
	StateOpenSent    SessionState = "OpenSent"
	StateOpenConfirm SessionState = "OpenConfirm"
	StateEstablished SessionState = "Established"
)

// PeerStatus is what the speaker observes of one peer.
type PeerStatus struct {
	// Address is the peer's address.
	Address netip.Addr
	// ASN is the peer's configured AS number.
	ASN uint32
	// State is the session state.
	State SessionState
	// Uptime is how long the session has been Established; zero otherwise.
	Uptime time.Duration
	// Received counts the prefixes the peer sent (all kept out of the RIB by
	// the node's import policy).
	Received uint64
	// Advertised counts the prefixes sent to the peer.
	Advertised uint64
	// GracefulRestart reports whether the session negotiated graceful
	// restart, so the peer keeps the node's routes while the speaker restarts.
	GracefulRestart bool
}

// Established reports whether the session is up.
func (p PeerStatus) Established() bool { return p.State == StateEstablished }
