// Package policydrops owns the record of a packet that a node's policy
// table dropped, as the daemon keeps it (from the kernel's netlink log)
// and as `kubectl estuary policy drops` and sysdump read it: plain values
// and their JSON, shared by the daemon and the kubectl plugin, which does
// not import the daemon.
package policydrops

import "time"

// Drop is one dropped packet, as the node's policy table logged it.
type Drop struct {
	Time time.Time `json:"time"`
	// Direction is "ingress" (the packet was going to Pod) or "egress"
	// (Pod sent it).
	Direction string `json:"direction"`
	// Pod is namespace/name of the local pod whose chain dropped the
	// packet, when the daemon knows it; HostVeth its host veth.
	Pod      string `json:"pod,omitempty"`
	HostVeth string `json:"hostVeth"`
	// Policy names the object whose Deny rule dropped it ("cnp/<name>",
	// "anp/<name>", "banp/<name>"), or is empty when the pod's isolation
	// (no allow rule matched) dropped it.
	Policy   string `json:"policy,omitempty"`
	Protocol string `json:"protocol"`
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	SrcPort  uint16 `json:"srcPort,omitempty"`
	DstPort  uint16 `json:"dstPort,omitempty"`
}

// Report is what one node's daemon holds: its most recent drops, oldest
// first, and how many older ones it no longer holds (Lost).
type Report struct {
	Node  string `json:"node"`
	Drops []Drop `json:"drops"`
	Lost  uint64 `json:"lost"`
}
