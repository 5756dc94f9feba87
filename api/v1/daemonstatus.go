package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AnnotationDaemonStatus is the Node annotation in which the node's daemon
// publishes what it set up on the node: its release, the conflist the
// container runtime reads, the forwarding fast path and, while it lags the
// cluster, its data path (a JSON NodeDaemonStatus). Only that node's daemon writes it, and only when it
// changes; `kubectl estuary status` reads it for every node without
// reaching into the daemons.
const AnnotationDaemonStatus = "networking.estuary.io/daemon-status"

// NodeDaemonStatus is the value of AnnotationDaemonStatus.
type NodeDaemonStatus struct {
	// Version is the daemon's release.
	Version string `json:"version"`
	// Conflist is the state of the daemon's CNI network configuration.
	Conflist NodeConflistStatus `json:"conflist"`
	// FastPath is the state of the tc BPF forwarding fast path.
	FastPath NodeFastPathStatus `json:"fastPath"`
	// Policy is the state of NetworkPolicy enforcement on the node; absent
	// when the daemon enforces no policy.
	// +optional
	Policy *NodePolicyStatus `json:"policy,omitempty"`
	// DataPath is present while the daemon's data path is stale: no pass
	// of its data-path loop has fully succeeded within the daemon's stale
	// bound (docs/status.md); absent while it is fresh.
	// +optional
	DataPath *NodeDataPathStatus `json:"dataPath,omitempty"`
	// Uplinks are the links the daemon chose per mode (vlan, bgp, vxlan)
	// from its preference lists (docs/status.md).
	// +optional
	Uplinks []NodeUplinkStatus `json:"uplinks,omitempty"`
}

// NodeUplinkStatus is the link a mode's networks use on the node.
type NodeUplinkStatus struct {
	// Mode is vlan, bgp or vxlan.
	Mode string `json:"mode"`
	// Link is the chosen link; empty when no candidate exists (Problem
	// says so) or, with no candidates, the mode's default link is used.
	// +optional
	Link string `json:"link,omitempty"`
	// Candidates are the names tried, in order.
	// +optional
	Candidates []string `json:"candidates,omitempty"`
	// Source is where the candidates came from: annotation, config or
	// default.
	Source string `json:"source"`
	// Problem says why the mode has no link, or why the node's annotation
	// was refused; the mode's networks are not programmed while no
	// candidate exists.
	// +optional
	Problem string `json:"problem,omitempty"`
}

// NodeDataPathStatus says that the daemon's data path is stale, and why. It
// is written when the data path turns stale and kept as it is until the
// data path is fresh again, so a stale node costs one write, not one per
// pass.
type NodeDataPathStatus struct {
	// Problem says how long the data path had gone without a good pass
	// when it turned stale, and why: the last pass's error, or a pass
	// that has not returned.
	Problem string `json:"problem"`
	// LastGoodPass is when the last fully successful pass ended; absent
	// when none has since the daemon started.
	// +optional
	LastGoodPass *metav1.Time `json:"lastGoodPass,omitempty"`
}

// NodePolicyStatus is what the node's daemon knows of what could keep its
// policy from being enforced.
type NodePolicyStatus struct {
	// KubeProxyMode is the mode kube-proxy on the node says it runs in
	// (iptables, nftables, ipvs); empty when it could not be learnt.
	// +optional
	KubeProxyMode string `json:"kubeProxyMode,omitempty"`
	// Problem says which traffic the node's policy does not judge, and
	// why; empty when the daemon knows of none.
	// +optional
	Problem string `json:"problem,omitempty"`
}

// NodeConflistStatus is the state of the conflist the daemon installs.
type NodeConflistStatus struct {
	// Path is the conflist's path on the node.
	Path string `json:"path"`
	// Installed is true when the file holds what the daemon wrote.
	Installed bool `json:"installed"`
	// Error says why the conflist could not be written.
	// +optional
	Error string `json:"error,omitempty"`
	// ShadowedBy names a configuration file in the same directory that
	// sorts first: the container runtime uses that one, not estuary's.
	// +optional
	ShadowedBy string `json:"shadowedBy,omitempty"`
}

// NodeFastPathStatus is the state of the forwarding fast path.
type NodeFastPathStatus struct {
	// State is FastPathLoaded, FastPathOff or FastPathRefused.
	State string `json:"state"`
	// Reason says why the kernel refused the fast path.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// Values of NodeFastPathStatus.State.
const (
	// FastPathLoaded: the program is loaded and attached to the node's
	// devices.
	FastPathLoaded = "Loaded"
	// FastPathOff: the daemon runs without it by configuration
	// (--fast-path=false).
	FastPathOff = "Off"
	// FastPathRefused: the daemon was asked for it but the kernel refused
	// the program; pods' traffic takes the kernel's forwarding path.
	FastPathRefused = "Refused"
)
