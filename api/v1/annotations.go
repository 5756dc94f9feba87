package v1

// Annotations and labels a user puts on pods, pod templates and namespaces to
// choose where a pod's addresses come from. A pod's own annotation wins over
// its namespace's; without either the pod gets the Overlay network.
const (
	// AnnotationNetwork names the Network to allocate from.
	AnnotationNetwork = "networking.estuary.io/network"
	// AnnotationSubnet names one subnet per family, comma-separated
	// ("pods-v4" or "pods-v4,pods-v6"); named subnets may be private.
	AnnotationSubnet = "networking.estuary.io/subnet"
	// AnnotationIPFamily is IPv4, IPv6 or DualStack. Default: every family
	// the network has public subnets for.
	AnnotationIPFamily = "networking.estuary.io/ip-family"
	// AnnotationNetworkType asks for a network of a type (Overlay or
	// Underlay): the pod is refused when the network it would get is of
	// another type.
	AnnotationNetworkType = "networking.estuary.io/network-type"
	// AnnotationIPRetain, set to "false" on a StatefulSet's pod template,
	// releases a pod's address when the pod goes instead of keeping it for
	// the pod that replaces it.
	AnnotationIPRetain = "networking.estuary.io/ip-retain"
)

// Values of AnnotationIPFamily.
const (
	IPFamilyIPv4      = "IPv4"
	IPFamilyIPv6      = "IPv6"
	IPFamilyDualStack = "DualStack"
)

// AnnotationAddresses is set by the manager on every IPInstance of a pod:
// the number of addresses the pod was given (2 for dual stack), so that a node
// waiting for the records knows when it has all of them.
const AnnotationAddresses = "networking.estuary.io/addresses"

// Labels the manager puts on IPInstances so they can be found by namespace,
// pod, node and subnet with a label selector.
const (
	LabelNamespace = "networking.estuary.io/namespace"
	LabelPod       = "networking.estuary.io/pod"
	LabelNode      = "networking.estuary.io/node"
	LabelSubnet    = "networking.estuary.io/subnet"
)

// Annotations the node daemon writes on its own Node: the address and MAC of
// the node's VXLAN tunnel endpoint. Every other node reads them to program
// its forwarding database and to answer neighbour misses for this node's pods.
const (
	AnnotationVTEPIP  = "networking.estuary.io/vtep-ip"
	AnnotationVTEPMAC = "networking.estuary.io/vtep-mac"
)
