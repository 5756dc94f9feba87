package nstest

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// UDPRoundTrip proves that traffic flows both ways between two namespaces: a
// datagram sent from a socket in fromNS to dst comes back from an echo socket
// bound to dst. The echo side runs in the first of holders where dst can be
// bound. It tries three times, one second each.
func UDPRoundTrip(fromNS string, dst netip.Addr, holders ...string) error {
	var srv *net.UDPConn
	for _, ns := range holders {
		if err := nsrun.Do(ns, func() (err error) {
			srv, err = net.ListenUDP("udp", &net.UDPAddr{IP: dst.AsSlice()})
			return err
		}); err == nil {
			break
		}
	}
	if srv == nil {
		return fmt.Errorf("no namespace of %v holds %s", holders, dst)
	}
	defer func() { _ = srv.Close() }()
	go echo(srv)
	var cli *net.UDPConn
	if err := nsrun.Do(fromNS, func() (err error) {
		cli, err = net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return fmt.Errorf("dial %s: %w", dst, err)
	}
	defer func() { _ = cli.Close() }()
	msg, buf := []byte("estuary"), make([]byte, 64)
	var err error
	for range 3 {
		if _, err = cli.Write(msg); err != nil {
			continue
		}
		_ = cli.SetReadDeadline(time.Now().Add(time.Second))
		var n int
		if n, err = cli.Read(buf); err == nil && bytes.Equal(buf[:n], msg) {
			return nil
		}
	}
	return fmt.Errorf("no echo from %s: %w", dst, err)
}

func echo(c *net.UDPConn) {
	buf := make([]byte, 64)
	for {
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			return
		}
		_, _ = c.WriteToUDP(buf[:n], from)
	}
}
