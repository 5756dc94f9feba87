// Package netmodel owns the meaning of the networking.estuary.io API: the
// rules every component reads the same way, written once.
//
//   - A Network's effective mode (VXLAN for Overlay, VLAN for Underlay when
//     unset), what its netID is in that mode (VNI, VLAN id or AS number), the
//     default VNI, and a subnet's natOutgoing default (on for Overlay, off
//     for Underlay).
//   - Network domains: which nodes a network reaches (Attached), the node
//     selector its pods are scheduled by (DomainSelector), and the node
//     labels that publish both (NetworkKey, AvailableKey).
//   - A pod's selection: its network annotations, each taken from the pod or
//     else its namespace (SelectionFor), checked against the cluster's
//     networks and subnets (ResolveNetwork), and the address families it
//     takes from the network's pool (Families, FamiliesNeeded), after the
//     cluster's defaults for what neither says (Defaults: network type, IP
//     family, StatefulSet retention), and the Underlay network of a pod
//     asking for one by type (ByType, UnderlayNetworks, NodeUnderlay;
//     defaults.go). The same
//     keys may be written as estuary labels or as hybridnet's
//     networking.alibaba.com/* annotations and labels, in hybridnet's
//     syntax (aliases.go, Translate).
//   - A pod's fixed addresses and retention (FixedFor), checked against its
//     network's subnets (CheckAddresses) and the administrator's tenancy
//     bounds: the longest ip-retain-ttl and where Never is allowed
//     (CheckRetention), which addresses a namespace may claim (never a
//     Node's; reservedIPs and private subnets only where a Subnet's
//     namespace selectors allow), and MaxPoolEntries.
//   - Denial, the error that names the refused object, the field at fault
//     and the reason.
//   - The BGP session states a node's daemon publishes on its Node
//     (ParseBGPPeers), read by the manager's BGPPeersEstablished condition.
//
// The webhook, the manager's controllers and the node daemon all call this
// package; none of them re-implements a rule, and none of them imports
// another. It is pure: no client, no informer cache, no kernel, only the
// API types (Layouts only remembers parsed Subnets).
package netmodel
