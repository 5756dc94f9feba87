package ops

// The policy table's drop log: its log rules send each dropped packet
// (rate-limited by the table's limit object) to the netlink log group
// policy.DropLogGroup; DropLog reads that group and decodes each message
// into a policydrops.Drop.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	nflog "github.com/florianl/go-nflog/v2"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/policydrops"
)

// dropLogReadBuffer is the log socket's receive buffer: what the kernel
// holds for the daemon before it loses messages.
const dropLogReadBuffer = 1 << 20

// DropLog reads the policy table's netlink log group in one namespace.
type DropLog struct {
	nf *nflog.Nflog
	// lost counts messages the socket lost (the kernel's ENOBUFS) and
	// messages that did not decode.
	lost atomic.Uint64
	// bound is closed once Run has bound the group: drops logged before
	// then reach no one.
	bound chan struct{}
}

// OpenDropLog opens the netlink log of the namespace at nsPath (the
// process's own when empty). Only one socket of a namespace can read the
// group.
func OpenDropLog(nsPath string) (*DropLog, error) {
	cfg := &nflog.Config{Group: policy.DropLogGroup, Copymode: nflog.CopyPacket, Bufsize: dropLogSnaplen}
	if nsPath != "" {
		ns, err := netns.GetFromPath(nsPath)
		if err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", nsPath, err)
		}
		defer func() { _ = ns.Close() }()
		cfg.NetNS = int(ns)
	}
	nf, err := nflog.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("open the netlink log: %w", err)
	}
	if err := nf.Con.SetReadBuffer(dropLogReadBuffer); err != nil {
		_ = nf.Close()
		return nil, fmt.Errorf("netlink log socket buffer: %w", err)
	}
	return &DropLog{nf: nf, bound: make(chan struct{})}, nil
}

// Run delivers each drop the group logs to fn, from one goroutine, until
// ctx ends or reading fails; a message it cannot decode is counted as
// lost. It returns nil when ctx ended.
func (d *DropLog) Run(ctx context.Context, fn func(policydrops.Drop)) error {
	failed := make(chan error, 1)
	hook := func(a nflog.Attribute) int {
		if a.Prefix == nil || a.Payload == nil {
			d.lost.Add(1)
			return 0
		}
		at := time.Now()
		if a.Timestamp != nil {
			at = *a.Timestamp
		}
		drop, err := policydrops.ParseDroppedPacket(*a.Prefix, *a.Payload, at.UTC())
		if err != nil {
			d.lost.Add(1)
			return 0
		}
		fn(drop)
		return 0
	}
	onErr := func(err error) int {
		if ctx.Err() != nil {
			return 1
		}
		if errors.Is(err, unix.ENOBUFS) {
			d.lost.Add(1)
			return 0
		}
		var op *netlink.OpError
		if errors.As(err, &op) && op.Timeout() {
			return 0
		}
		failed <- fmt.Errorf("read the netlink log group %d: %w", policy.DropLogGroup, err)
		return 1
	}
	if err := d.nf.RegisterWithErrorFunc(ctx, hook, onErr); err != nil {
		return fmt.Errorf("listen on the netlink log group %d: %w", policy.DropLogGroup, err)
	}
	close(d.bound)
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// Bound is closed once Run listens on the group.
func (d *DropLog) Bound() <-chan struct{} { return d.bound }

// Lost is how many logged drops the reader lost: the socket's overflows
// and messages that did not decode.
func (d *DropLog) Lost() uint64 { return d.lost.Load() }

// Close closes the socket.
func (d *DropLog) Close() error {
	if err := d.nf.Close(); err != nil {
		return fmt.Errorf("close the netlink log: %w", err)
	}
	return nil
}
