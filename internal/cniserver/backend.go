package cniserver

import (
	"context"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// Attachment is one validated CNI request as the backend sees it.
type Attachment struct {
	ContainerID  string
	IfName       string
	Netns        string
	PodNamespace string
	PodName      string
	PodUID       string
	// NetworkConfig is the network configuration from the runtime, verbatim.
	NetworkConfig []byte
}

// Backend builds and removes pod interfaces. The server records endpoints
// and serialises calls per container; the backend only touches the kernel
// (or whatever it manages).
type Backend interface {
	// Add builds the interface and returns its configuration.
	Add(ctx context.Context, a Attachment) (*cniv1.AddReply, error)
	// Del removes the interface. It must succeed when the interface or its
	// network namespace is already gone.
	Del(ctx context.Context, a Attachment) error
	// Check verifies that the interface still matches the recorded endpoint.
	Check(ctx context.Context, a Attachment, ep endpointstore.Endpoint) error
	// Ready returns nil when Add can be served, else the reason it cannot.
	Ready(ctx context.Context) error
}
