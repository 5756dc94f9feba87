package netlab

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Capabilities are kernel network features the lab reports, found by trying them.
type Capabilities struct {
	VLAN   bool   `json:"vlan8021q"`
	VXLAN  bool   `json:"vxlan"`
	Detail string `json:"detail,omitempty"`
}

// Probe tries each feature inside a scratch namespace named scratch and removes it.
func Probe(scratch string) (Capabilities, error) {
	var c Capabilities
	if err := Create(scratch); err != nil {
		return c, err
	}
	defer func() { _ = Delete(scratch) }()
	if err := Veth(scratch, "probe0", "", scratch, "probe1"); err != nil {
		return c, fmt.Errorf("probe parent link: %w", err)
	}
	h, err := handle(scratch)
	if err != nil {
		return c, err
	}
	defer h.Close()
	parent, err := h.LinkByName("probe0")
	if err != nil {
		return c, fmt.Errorf("find probe0: %w", err)
	}
	idx := parent.Attrs().Index
	vlan := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "probe0.7", ParentIndex: idx}, VlanId: 7}
	if err := h.LinkAdd(vlan); err == nil {
		c.VLAN = true
	} else {
		c.Detail = fmt.Sprintf("802.1Q VLAN: %v", err)
	}
	vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "probevx"}, VxlanId: 7, VtepDevIndex: idx, Port: 4789}
	if err := h.LinkAdd(vx); err == nil {
		c.VXLAN = true
	}
	return c, nil
}
