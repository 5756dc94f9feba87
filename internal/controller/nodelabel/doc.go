// Package nodelabel is the manager's node label controller: it labels every
// Node with the networks attached to it and whether each still has free
// addresses, so that schedulers, users and other components can select nodes
// by network domain and by capacity.
//
// For each network attached to a node (the Overlay network on every node, an
// Underlay network on the nodes its nodeSelector matches) the node carries:
//
//	networking.estuary.io/network-<network>=attached
//	networking.estuary.io/ipv4-available-<network>=true|false
//	networking.estuary.io/ipv6-available-<network>=true|false
//
// An availability label is true while some non-private subnet of the network
// in that family has status.available other than "0" (the counts the pod
// address controller's status writer publishes), or has no count yet. It is
// false when every such subnet is full, or the network has no public subnet
// of that family.
//
// A label key's name part (after the "/") is at most 63 characters; when
// the network's name makes it longer, the name is cut and followed by "-" and
// the first 10 hex digits of its SHA-256 (see NetworkKey and AvailableKey).
//
// The controller is level-triggered: a Node's create, delete or label change
// reconciles that node; a Network's or Subnet's create or delete, or an
// update of what the labels derive from (a Network's type, domain or
// deletion; a Subnet's network, family, privacy, deletion, or its
// status.available crossing zero), reconciles every node. Each
// reconcile computes the desired managed labels and, only when they differ
// from the node's, sends one JSON merge patch holding the keys that change.
// The managed keys are those under networking.estuary.io/ starting with
// network-, ipv4-available- or ipv6-available-; such a key that is not
// desired is removed, and every other label is left alone.
package nodelabel
