// Package bgp is the node's BGP speaker for BGP-mode underlay networks: an
// embedded GoBGP v4 server that announces the node's pod addresses and subnet
// prefixes to the routers named by a Network's spec.bgpPeers. The speaker of
// the BGP network whose domain holds the node also announces the host route
// of each of the node's GlobalBGP pods (the caller lists them among the
// prefixes; see translate.BuildBGPNetworks), never a GlobalBGP subnet.
//
// # Design
//
// The speaker is driven level-triggered. Start brings up the server with the
// initial peers and prefixes; Reconcile is given the complete desired set of
// peers and prefixes every time and adds, replaces or removes only what
// differs, so calling it again with the same input changes nothing. Prefixes
// are added before peers, so a new session's first UPDATE already carries the
// full set.
//
// Only active sessions are used by default (Config.ListenPort zero): the node
// dials its peers and never listens on TCP 179, so several speakers can share a
// network namespace and nothing on the host is exposed. Every announced route
// carries the node's own address as next hop (Config.NextHopIPv4/IPv6), so the
// fabric forwards pod traffic straight to the node, which delivers it through
// its local pod table.
//
// The node is a stub, never a transit: a global import policy accepts only
// locally originated paths, so routes learned from one peer are neither kept
// in the RIB nor re-advertised to another. The sessions still count what the
// peers send (bgpstatus.PeerStatus.Received).
//
// # Graceful restart
//
// Every peer is configured with the graceful restart capability (RFC 4724)
// for IPv4 and IPv6 unicast, with the restart time from the Network's
// gracefulRestartSeconds (DefaultRestartTime when unset; zero disables it for
// that peer). What happens on a daemon restart:
//
//   - Stop calls GoBGP's StopBgp with AllowGracefulRestart. GoBGP then removes
//     its neighbours without queuing a Cease NOTIFICATION for any peer that
//     negotiated graceful restart: the established session's TCP connection
//     is simply closed. (GoBGP's own BgpServer.Stop passes
//     AllowGracefulRestart=false and sends Cease/Peer De-configured, which
//     makes the peer flush the node's routes at once; Stop never uses it for
//     the sessions.) A peer that did not negotiate graceful restart still gets
//     the NOTIFICATION, as RFC 4724 requires.
//   - The peer, as receiving speaker, marks the node's routes stale and keeps
//     forwarding on them for the restart time while the node's kernel routes
//     (pod host routes, rules) stay in place.
//   - The new daemon starts a speaker with Config.Restarting. Its OPEN carries
//     the Restart State bit and the Forwarding State bit for each family, so
//     the peer keeps the stale routes after the session comes back. GoBGP
//     defers its own advertisement until it has the End-of-RIB marker from
//     every peer (or DeferralTime passes, so a peer that stays down delays the
//     others by that much), then sends the current set and its End-of-RIB;
//     the peer drops whatever stale routes were not re-announced.
//
// Without Config.Restarting the OPEN has the Forwarding State bit clear and
// the peer drops stale routes as soon as the session is up again; the node
// re-announces them in the same instant, but forwarding can blip, so the
// daemon sets Restarting whenever pod routes of an earlier run are still in
// the kernel.
//
// Removing a peer or changing its AS number, password or restart time is not
// a restart: the session is deconfigured with a Cease NOTIFICATION and the
// peer forgets the node's routes at once.
//
// # Passwords
//
// TCP MD5 passwords (RFC 2385) are given as resolved strings; reading the
// Secret named by passwordSecretRef is the daemon's job.
package bgp
