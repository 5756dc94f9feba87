// Package translate turns what the API says (Networks, Subnets, Nodes,
// other nodes' IPInstances as remote.Records) and what the node's endpoint store says (the pods plumbed
// here) into the data plane's inputs: the overlay's Input (BuildInput), the
// tunnel's neighbour table (NeighTable), the underlay's Input
// (BuildUnderlayInput), the BGP networks a node announces and their
// speakers' configuration (BuildBGPNetworks, SpeakerConfig), and the fast
// path's desired maps (FastPathDesired, FastPathTunnel). The policy a node
// enforces is translated by package policytranslate, which the manager
// shares.
//
// It is pure: no client, no cache, no kernel; equal inputs give equal
// outputs. One object it cannot read (a malformed annotation or CIDR) is
// skipped and reported in the error while the rest of the input stays
// valid, so one bad object never cuts the others off. The rules it applies
// (modes, NAT defaults, domains) are package netmodel's. Package datapath
// runs the loop that reads the cache, calls this package and applies the
// results.
package translate
