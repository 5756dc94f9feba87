// Package ops is the data plane's only contact with the kernel. It owns
// every netlink and nftables call estuary makes: it reads routes, rules,
// neighbours, FDB entries, addresses and links into desired.State values,
// applies a desired.Plan with idempotent writes, makes the devices estuary
// owns, writes the source NAT and policy nftables tables and the fast
// path's tc attachment, sends ARP and NDP, watches links and neighbour
// misses, reads the policy table's logged drops, and lists a namespace's
// objects as plain values for the node snapshot (internal/nodesnap), which
// formats them for people. It holds no policy: what to write comes from
// package desired (and policy), and so do the names of what estuary owns
// (desired/routing.go). conn.go describes how the package is built.
package ops

// Handle is one network namespace's netlink connection and hands out its
// kernel object families (see conn.go).
type Handle struct {
	c *conn

	links   Links
	devices Devices
	vlans   VLANs
	addrs   Addrs
	routes  Routes
	rules   Rules
	neighs  Neighs
	tc      TC
	segment Segment
}

// The kernel object families: each holds the namespace's conn and is the
// only type that touches its objects.
type (
	// Links reads and changes any link of the namespace.
	Links struct{ *conn }
	// Devices makes the links estuary owns (desired/routing.go).
	Devices struct{ *conn }
	// VLANs makes, lists and deletes the underlay's 802.1Q sub-interfaces.
	VLANs struct{ *conn }
	// Addrs writes and reads addresses.
	Addrs struct{ *conn }
	// Routes writes and reads routes.
	Routes struct{ *conn }
	// Rules writes and reads policy rules.
	Rules struct{ *conn }
	// Neighs writes, reads and watches neighbour entries and the FDB.
	Neighs struct{ *conn }
	// TC attaches and detaches the fast path's tc filter.
	TC struct{ *conn }
	// Segment sends and receives ARP and NDP on a link's segment.
	Segment struct{ *conn }
)

// Open returns a handle for the network namespace at nsPath (for example
// /run/netns/node-1 or /proc/<pid>/ns/net). An empty path means the
// namespace the process was started in.
func Open(nsPath string) (*Handle, error) {
	c, err := dial(nsPath)
	if err != nil {
		return nil, err
	}
	return &Handle{
		c: c, links: Links{c}, devices: Devices{c}, vlans: VLANs{c}, addrs: Addrs{c},
		routes: Routes{c}, rules: Rules{c}, neighs: Neighs{c}, tc: TC{c}, segment: Segment{c},
	}, nil
}

// Close releases the handle's sockets.
func (h *Handle) Close() { h.c.close() }

// Links returns the handle's link family.
func (h *Handle) Links() *Links { return &h.links }

// Devices returns the handle's writer of estuary's devices.
func (h *Handle) Devices() *Devices { return &h.devices }

// VLANs returns the handle's writer of 802.1Q sub-interfaces.
func (h *Handle) VLANs() *VLANs { return &h.vlans }

// Addrs returns the handle's address family.
func (h *Handle) Addrs() *Addrs { return &h.addrs }

// Routes returns the handle's route family.
func (h *Handle) Routes() *Routes { return &h.routes }

// Rules returns the handle's policy rule family.
func (h *Handle) Rules() *Rules { return &h.rules }

// Neighs returns the handle's neighbour and FDB family.
func (h *Handle) Neighs() *Neighs { return &h.neighs }

// TC returns the handle's traffic control writer.
func (h *Handle) TC() *TC { return &h.tc }

// Segment returns the handle's ARP and NDP prober.
func (h *Handle) Segment() *Segment { return &h.segment }
