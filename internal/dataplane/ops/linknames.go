package ops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// rtextFilterSkipStats asks a link dump to leave the statistics out
// (RTEXT_FILTER_SKIP_STATS, Linux 4.19).
const rtextFilterSkipStats = 1 << 3

// linkDumper lists a namespace's links by name and index only. Read needs
// nothing else of them, and a full link dump (the library's LinkList: every
// attribute of every link, statistics included, each decoded) costs far
// more than the routes on a node with hundreds of pod veths.
type linkDumper struct {
	once sync.Once
	sock *nl.SocketHandle
	err  error
}

// socket opens the dumper's netlink socket inside the namespace at path
// ("" for the process's own) on first use, on a fresh locked thread.
func (d *linkDumper) socket(path string) (*nl.SocketHandle, error) {
	d.once.Do(func() {
		ch := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			target := netns.None()
			if path != "" {
				ns, err := netns.GetFromPath(path)
				if err != nil {
					ch <- err
					return
				}
				defer func() { _ = ns.Close() }()
				target = ns
			}
			s, err := nl.GetNetlinkSocketAt(target, netns.None(), unix.NETLINK_ROUTE)
			if err == nil {
				err = errors.Join(s.SetSendTimeout(&nl.SocketTimeoutTv), s.SetReceiveTimeout(&nl.SocketTimeoutTv))
				if err != nil {
					s.Close()
				}
			}
			if err == nil {
				d.sock = &nl.SocketHandle{Socket: s}
			}
			ch <- err
		}()
		if err := <-ch; err != nil {
			d.err = fmt.Errorf("link dump socket: %w", err)
		}
	})
	return d.sock, d.err
}

func (d *linkDumper) close() {
	d.once.Do(func() {})
	if d.sock != nil {
		d.sock.Close()
	}
}

// dump lists the links as links (names and indexes). A dump the kernel
// marks interrupted returns netlink's ErrDumpInterrupted, for retryDump.
func (d *linkDumper) dump(path string) (links, error) {
	sh, err := d.socket(path)
	if err != nil {
		return links{}, err
	}
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: sh}
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_EXT_MASK, nl.Uint32Attr(rtextFilterSkipStats)))
	msgs, dumpErr := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	l := links{byIndex: make(map[int]string, len(msgs)), byName: make(map[string]int, len(msgs))}
	for _, m := range msgs {
		if len(m) < unix.SizeofIfInfomsg {
			return links{}, fmt.Errorf("link message of %d bytes", len(m))
		}
		index := int(nl.DeserializeIfInfomsg(m).Index)
		name, ok := ifName(m[unix.SizeofIfInfomsg:])
		if !ok {
			return links{}, fmt.Errorf("link %d: no name in its message", index)
		}
		l.byIndex[index], l.byName[name] = name, index
	}
	return l, dumpErr
}

// ifName scans a link message's attributes for IFLA_IFNAME, which the
// kernel puts near the start, and decodes nothing else.
func ifName(b []byte) (string, bool) {
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		if n < unix.SizeofRtAttr || n > len(b) {
			return "", false
		}
		if binary.NativeEndian.Uint16(b[2:4]) == unix.IFLA_IFNAME {
			return string(bytes.TrimRight(b[unix.SizeofRtAttr:n], "\x00")), true
		}
		b = b[min(len(b), (n+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1)):]
	}
	return "", false
}
