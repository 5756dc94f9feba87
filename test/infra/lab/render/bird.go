package render

import (
	"fmt"
	"strings"
)

// BirdOptions describe the router's BGP speaker.
type BirdOptions struct {
	RouterID  string
	ASN       int
	PeersFile string // included file where later work adds BGP peers
}

// Bird renders the router's bird2 configuration: device and direct protocols, a
// kernel protocol per IP family that installs only BGP-learned routes, and a peer
// template that the included peers file instantiates. Every session carries
// IPv4 and IPv6 unicast (multiprotocol BGP), whichever family it runs over, so
// a node announces its pods' /32s and /128s on one session.
func Bird(o BirdOptions) string {
	var s strings.Builder
	fmt.Fprintf(&s, "# estuary lab router. BGP peers live in %s.\n", o.PeersFile)
	fmt.Fprintf(&s, "log stderr all;\nrouter id %s;\n\n", o.RouterID)
	s.WriteString("protocol device { scan time 10; }\n\n")
	s.WriteString("protocol direct { ipv4; ipv6; interface \"eth0\", \"ext0\"; }\n\n")
	for _, fam := range []string{"ipv4", "ipv6"} {
		fmt.Fprintf(&s, "protocol kernel {\n  %s {\n    import none;\n", fam)
		s.WriteString("    export filter { if source = RTS_BGP then accept; reject; };\n  };\n}\n\n")
	}
	fmt.Fprintf(&s, "template bgp lab_peer {\n  local as %d;\n  graceful restart on;\n", o.ASN)
	s.WriteString("  ipv4 { import all; export none; };\n  ipv6 { import all; export none; };\n}\n\n")
	fmt.Fprintf(&s, "include \"%s\";\n", o.PeersFile)
	return s.String()
}

// BirdPeer is one node the router peers with.
type BirdPeer struct {
	Name    string // node name; the protocol is named after it
	Address string
	ASN     int
}

// BirdPeers renders the peers file: one BGP session per node, from the
// lab_peer template. A node that runs no BGP speaker leaves its session
// in Active; bird keeps retrying.
func BirdPeers(routerASN int, peers []BirdPeer) string {
	var s strings.Builder
	fmt.Fprintf(&s, "# BGP peers of the lab router (AS %d).\n", routerASN)
	for _, p := range peers {
		fmt.Fprintf(&s, "protocol bgp %s from lab_peer { neighbor %s as %d; }\n", BirdProtocol(p.Name), p.Address, p.ASN)
	}
	return s.String()
}

// BirdProtocol is the name of the router's BGP session with a node.
func BirdProtocol(node string) string { return strings.ReplaceAll(node, "-", "_") }
