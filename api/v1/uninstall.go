package v1

// AnnotationUninstallRequest is the annotation on the daemon's DaemonSet
// that asks every daemon to take estuary off its node. Its value names the request (any string;
// the requester makes one up). Only this annotation uninstalls: a daemon
// whose DaemonSet is deleted, orphaned or re-created leaves its node as it
// is. Removing the annotation withdraws the request: each daemon restarts
// and installs estuary again.
const AnnotationUninstallRequest = "networking.estuary.io/uninstall"

// AnnotationUninstalled is the Node annotation in which its daemon answers
// an uninstall request (a JSON NodeUninstallStatus). The daemon writes it once it has
// stopped serving and removed estuary from the node.
const AnnotationUninstalled = "networking.estuary.io/uninstalled"

// NodeUninstallStatus is the value of AnnotationUninstalled.
type NodeUninstallStatus struct {
	// Request is the value of the AnnotationUninstallRequest answered.
	Request string `json:"request"`
	// Error says what could not be removed or restored; empty when the
	// node is as it was before estuary.
	// +optional
	Error string `json:"error,omitempty"`
	// Done lists what was removed and restored, in words.
	// +optional
	Done string `json:"done,omitempty"`
}
