package v1

import "github.com/estuary-cni/estuary/pkg/family"

// Annotations and labels a user puts on pods, pod templates and namespaces to
// choose where a pod's addresses come from. A pod's own annotation wins over
// its namespace's; without either the pod gets the Overlay network.
const (
	// AnnotationNetwork names the Network to allocate from.
	AnnotationNetwork = "networking.estuary.io/network"
	// AnnotationSubnet names the subnets to allocate from, comma-separated,
	// at most 16 and none twice ("pods-v4", "pods-v4,pods-v6" or
	// "pods-a,pods-b,pods-v6"). For each family the subnets of that family
	// are tried in the order written and the first with a free address is
	// used. All must belong to one network; named subnets may be private.
	AnnotationSubnet = "networking.estuary.io/subnet"
	// AnnotationIPFamily is IPv4, IPv6 or DualStack. Default: every family
	// the network has public subnets for.
	AnnotationIPFamily = "networking.estuary.io/ip-family"
	// AnnotationNetworkType asks for a network of a type (Overlay or
	// Underlay): the pod is refused when the network it would get is of
	// another type.
	AnnotationNetworkType = "networking.estuary.io/network-type"
	// AnnotationIPRetain ("true" or "false") says whether a pod's addresses
	// are kept for its workload when the pod goes. Default: "true" for a
	// StatefulSet's pods (kept for the pod of the same ordinal), "false" for
	// every other pod. A retaining pod of any other workload leaves its
	// addresses to its top-level owner (the Deployment of its ReplicaSet,
	// the CronJob of its Job, its DaemonSet, ReplicaSet or Job, or the pod
	// itself), whose next pod takes them first.
	AnnotationIPRetain = "networking.estuary.io/ip-retain"
	// AnnotationIPRetainTTL is how long a retained address is kept: a
	// duration ("30m", "24h") or "Never". Default: 24h for every workload
	// but a StatefulSet, whose addresses are kept (without it) as long as
	// the StatefulSet has the ordinal.
	AnnotationIPRetainTTL = "networking.estuary.io/ip-retain-ttl"
	// AnnotationIPAddress asks for given addresses, one per family,
	// comma-separated ("10.10.0.7" or "10.10.0.7,fd00:10::7").
	AnnotationIPAddress = "networking.estuary.io/ip-address"
	// AnnotationIPPool is a comma-separated list of addresses the pod takes
	// one entry of: a StatefulSet's pod of ordinal i takes entry i, any
	// other pod the first entry no other pod holds. A dual-stack entry
	// names one address per family joined by "/" ("10.10.0.7/fd00:10::7").
	AnnotationIPPool = "networking.estuary.io/ip-pool"
	// AnnotationMACAddress fixes the MAC address of the pod's interface
	// ("0a:58:0a:0a:00:07", unicast).
	AnnotationMACAddress = "networking.estuary.io/mac-address"
	// AnnotationMACPool is a comma-separated list of MAC addresses: the pod
	// takes the entry with the index of the ip-pool entry it took, or, for a
	// StatefulSet's pod, the entry of its ordinal.
	AnnotationMACPool = "networking.estuary.io/mac-pool"
)

// LabelWebhook set to WebhookDisabled on a pod (or its template) keeps
// estuary's pod admission webhooks away from it: the API server does not
// call them (the webhook configurations' objectSelector), and a webhook
// called anyway admits the pod unchanged. Such a pod gets no node affinity
// for its network's domain or free capacity, and a bad selection or fixed
// address is not denied at creation; the manager still applies the same
// rules before it allocates, and refuses with an event on the pod.
const LabelWebhook = "networking.estuary.io/webhook"

// WebhookDisabled is the LabelWebhook value that opts a pod out.
const WebhookDisabled = "disabled"

// RetainNever is the AnnotationIPRetainTTL value that keeps a retained
// address until it is released by hand.
const RetainNever = "Never"

// Values of AnnotationIPFamily: the name of one family (pkg/family spells
// it), or both.
const (
	IPFamilyIPv4      = string(family.IPv4)
	IPFamilyIPv6      = string(family.IPv6)
	IPFamilyDualStack = "DualStack"
)

// AnnotationAddresses is set by the manager on every IPInstance of a pod:
// the number of addresses the pod was given (2 for dual stack), so that a node
// waiting for the records knows when it has all of them.
const AnnotationAddresses = "networking.estuary.io/addresses"

// AnnotationFence is written by the manager on one IPInstance (the first by
// name) when it reads every record from its cache: the time of the write,
// which the manager then waits to see in its cache before it trusts the
// cache (see internal/controller/podipam/fence.go). It means nothing else.
const AnnotationFence = "networking.estuary.io/fence"

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
