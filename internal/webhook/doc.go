// Package webhook is estuary's admission webhook: the rules about Networks,
// Subnets and pods that need other objects to decide, which the CRD schema's
// CEL rules (one object at a time) cannot express.
//
// Validating rules:
//
//   - Network: at most one Overlay network; two Underlay networks never
//     share a node (their nodeSelectors must not both match any Node, and
//     must not be identical even while no Node matches); a BGP network has a
//     peer; a network that still has subnets cannot be deleted, nor a BGP
//     network while GlobalBGP addresses are in use on its nodes
//     (globalbgp.go).
//   - Subnet: its network exists; subnets do not overlap anywhere in the
//     cluster, except that subnets of one network may share an identical CIDR
//     when their start-end ranges are disjoint and neither range holds the
//     other's gateway (the allocator's rule, ipam.Footprint.Conflicts, with
//     the default start and end of ipam.Window); a subnet of a VLAN network
//     has a gateway; only a VLAN network's subnets override the VLAN id;
//     range.version matches the CIDR; a subnet that still has IPInstances
//     cannot be deleted.
//   - Pod (create): the network, subnets and network type it asks for through
//     its annotations, or its namespace's, parse, exist and agree; its
//     fixed-address and retention annotations stay within the
//     administrator's tenancy bounds (netmodel.Bounds: the longest
//     ip-retain-ttl, Never only where its Network allows it; no Node
//     address, reservedIPs and private subnets only from the namespaces
//     their Subnet selects, at most netmodel.MaxPoolEntries pool entries).
//     A pod of the GlobalBGP network is refused while the cluster has no
//     BGP network (there is no node whose speaker would announce it; a pod
//     let through by a bypassed webhook fails its CNI ADD, bgp_session).
//   - Network and Subnet: their namespace selectors parse.
//
// Mutating rules (pod create), each ANDed into every one of the pod's own
// required node selector terms:
//
//   - a pod whose network is an Underlay network gets the network's
//     nodeSelector, so it is only scheduled inside the network's domain;
//   - a pod gets, for each address family it takes a new address of (its
//     ip-family annotation, else the families of the network's public
//     subnets; none when it names its subnets, or is a StatefulSet pod an
//     IPInstance is kept for), networking.estuary.io/ipv4-available-<network>
//     (or ipv6-) NotIn [false], the labels internal/controller/nodelabel
//     keeps (keys from netmodel.AvailableKey), so a pod whose network is full stays Pending with the
//     scheduler's node affinity reason instead of failing on a node;
//   - a pod asking for an Underlay network by type (no network or subnet
//     named) gets one alternative per Underlay network it may use, the
//     network's nodeSelector and availability, ORed (bytype.go).
//   - a pod of the GlobalBGP network gets one alternative per BGP-mode
//     Underlay network, its nodeSelector and the GlobalBGP network's
//     availability, ORed (globalbgp.go).
//
// The cluster's defaults (Options.Defaults: network type, IP family,
// StatefulSet retention; the manager's --default-* flags) are applied to
// every pod's selection before these rules, as the manager applies them
// before it allocates.
//
// Design: every rule is a pure function over plain values (the object and
// the lists of Networks, Subnets, Nodes or IPInstances it is checked against)
// and returns a *netmodel.Denial, or several joined with errors.Join, that
// names the object, the field and the other object involved. A pod's rules
// (its selection and the network it resolves to) live in package netmodel,
// which the manager calls too before it allocates; the Network, Subnet and
// IPInstance rules live here. The admission handlers only read those lists
// from the manager's cache and call the rules. The cache is
// eventually consistent and two concurrent requests can each pass alone
// (two Overlay networks created at once, for example); the webhook narrows
// the window in which a bad object can be written, and the re-check in the
// manager is what makes a bypassed or raced webhook harmless.
//
// Failure policies: the Network and Subnet webhooks fail closed; the pod
// webhooks default to Ignore (Service.PodFailurePolicy), so creating a pod
// never depends on the webhook being up: the manager re-checks the pod rules
// before it allocates and refuses an out-of-domain allocation with an event.
//
// Serving: Setup registers the handlers on the manager's webhook server
// (paths Path*) for a certificate provided in its CertDir; SetupWithRotation
// lets cert-controller's rotator create and renew the certificate in a
// Secret and inject its CA into the configurations that Configurations
// builds, and starts serving once the Secret is mounted. The rotator's
// reads are scoped by name to that Secret and those configurations, so its
// RBAC grants name them (see scopedManager). The pod webhooks
// skip kube-system and the webhook's own namespace, so the webhook cannot
// keep its own pods from starting.
//
// Updates are checked only when the spec changes, so metadata-only writes
// (finalizers, labels) always pass, even on objects stored before a rule
// existed or while the webhook was bypassed.
package webhook
