package ops

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// The fast path's tc filter (owner fast-path) is one cls_bpf filter in
// direct-action mode on a device's ingress, at desired.TCPriority and
// desired.TCHandle on the clsact qdisc. The qdisc is shared with anything else
// that uses tc on the device; only the filter is estuary's.

// IngressProgram is the BPF program estuary's filter on a device runs.
type IngressProgram struct {
	Name string
	ID   uint32
}

// AttachIngress makes the BPF program fd (named name) estuary's filter on
// link's ingress, adding the clsact qdisc if the device has none. It
// replaces estuary's previous filter in one step, so packets never meet a
// device without one.
func (h *TC) AttachIngress(link string, fd int, name string) error {
	l, err := h.nl.LinkByName(link)
	if err != nil {
		return fmt.Errorf("attach %s to %s ingress: %w", name, link, err)
	}
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT,
	}}
	if err := h.nl.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("attach %s to %s ingress: add clsact qdisc: %w", name, link, err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: desired.TCHandle, Priority: desired.TCPriority, Protocol: unix.ETH_P_ALL,
		},
		Fd: fd, Name: name, DirectAction: true,
	}
	if err := h.nl.FilterReplace(f); err != nil {
		return fmt.Errorf("attach %s to %s ingress: %w", name, link, err)
	}
	return nil
}

// Ingress returns the program of estuary's filter on link's ingress; false
// when there is none.
func (h *TC) Ingress(link string) (IngressProgram, bool, error) {
	l, err := h.nl.LinkByName(link)
	if err != nil {
		return IngressProgram{}, false, fmt.Errorf("ingress filters of %s: %w", link, err)
	}
	f, err := h.ownFilter(l)
	if err != nil || f == nil {
		return IngressProgram{}, false, err
	}
	return IngressProgram{Name: f.Name, ID: uint32(f.Id)}, true, nil
}

// DetachIngress removes estuary's filter from link's ingress, if any.
func (h *TC) DetachIngress(link string) error {
	l, err := h.nl.LinkByName(link)
	if err != nil {
		return fmt.Errorf("detach from %s ingress: %w", link, err)
	}
	f, err := h.ownFilter(l)
	if err != nil || f == nil {
		return err
	}
	if err := h.nl.FilterDel(f); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("detach %s from %s ingress: %w", f.Name, link, err)
	}
	return nil
}

// ownFilter finds estuary's filter among l's ingress filters; nil if none,
// and nil without error if the device has no clsact qdisc.
func (h *TC) ownFilter(l netlink.Link) (*netlink.BpfFilter, error) {
	fs, err := h.nl.FilterList(l, netlink.HANDLE_MIN_INGRESS)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ingress filters of %s: %w", l.Attrs().Name, err)
	}
	for _, f := range fs {
		b, ok := f.(*netlink.BpfFilter)
		if ok && b.Priority == desired.TCPriority && b.Handle == desired.TCHandle {
			return b, nil
		}
	}
	return nil, nil
}

// LinkIndexes maps the name of every link in the namespace to its index
// (Links.Indexes): a filter is attached at a device's index.
func (h *TC) LinkIndexes() (map[string]int, error) { return (&Links{h.conn}).Indexes() }

// DeleteEmptyClsact deletes link's clsact qdisc when no filter is left on
// its ingress or egress hook (the qdisc AttachIngress added for estuary's
// filter). It reports whether it deleted one; a link without the qdisc, or
// with another party's filters on it, is left alone.
func (h *TC) DeleteEmptyClsact(link string) (bool, error) {
	l, err := h.nl.LinkByName(link)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("clsact qdisc of %s: %w", link, err)
	}
	qs, err := h.nl.QdiscList(l)
	if err != nil {
		return false, fmt.Errorf("qdiscs of %s: %w", link, err)
	}
	var clsact netlink.Qdisc
	for _, q := range qs {
		if q.Type() == "clsact" {
			clsact = q
		}
	}
	if clsact == nil {
		return false, nil
	}
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := h.nl.FilterList(l, parent)
		if err != nil {
			return false, fmt.Errorf("filters of %s: %w", link, err)
		}
		if len(fs) > 0 {
			return false, nil
		}
	}
	if err := h.nl.QdiscDel(clsact); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("delete clsact qdisc of %s: %w", link, err)
	}
	return true, nil
}
