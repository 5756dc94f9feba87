// Package endpointsv1 is the node daemon's /endpoints document: the JSON the
// daemon's health server serves on the node's loopback, and `estuary-daemon
// endpoints` prints, listing every pod interface the daemon plumbed. The
// daemon writes it; `kubectl estuary check` and the chaos suite read it. It
// holds the wire types only and depends on the standard library alone.
package endpointsv1

import (
	"net/netip"
	"time"
)

// NodeEndpointList is what a daemon serves at /endpoints: its node and
// every endpoint of its store.
type NodeEndpointList struct {
	Node      string     `json:"node"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Endpoint is one pod interface a daemon plumbed, as its store records it.
type Endpoint struct {
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
	PodUID       string `json:"podUID,omitempty"`
	ContainerID  string `json:"containerID"`
	IfName       string `json:"ifname"`
	Network      string `json:"network,omitempty"`
	// IPs are the interface's addresses in CIDR form.
	IPs     []string  `json:"ips,omitempty"`
	Created time.Time `json:"created"`
	// Recovered marks a record the daemon rebuilt from the kernel.
	Recovered bool `json:"recovered,omitempty"`
}

// Key is the endpoint's container ID and interface, as the daemon keys it.
func (e Endpoint) Key() string { return e.ContainerID + "/" + e.IfName }

// Pod is namespace/name of the endpoint's pod, or "" when it names none.
func (e Endpoint) Pod() string {
	if e.PodName == "" {
		return ""
	}
	return e.PodNamespace + "/" + e.PodName
}

// Addrs are the endpoint's addresses without prefix length.
func (e Endpoint) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, s := range e.IPs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Addr())
		} else if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}
