// Package bgpstatus is the manager's BGP session status controller: it sets
// the BGPPeersEstablished condition on every Network in mode BGP from the
// session states the nodes' daemons publish.
//
// Each node's daemon publishes, in its own Node's annotation
// networking.estuary.io/bgp-peers, a JSON object mapping each BGP network
// whose domain holds the node to its peers and their session states
// (api/v1 NodeBGPPeer). Only that node's daemon writes that annotation, so
// the daemons never contend for an object; this controller only reads
// them.
//
// For a BGP network the condition is True when every node of the domain
// (the nodes its nodeSelector matches, as netmodel.Attached says) has at
// least one Established session, and False otherwise with a message naming
// each node that has none and why: its peers and their states, or that it
// published nothing for the network (its daemon is not running or has not
// started the network's speaker). A domain without nodes is False with
// reason NoNodes. The condition carries the Network's generation as its
// observedGeneration; status.observedGeneration is the address status
// writer's and is left alone.
//
// The controller is level-triggered: a Network's creation or spec change
// reconciles that network; a Node's creation, deletion or change of labels
// or annotations reconciles every BGP network. The status is written with a
// merge patch under optimistic locking, and only when the condition
// changes.
package bgpstatus
