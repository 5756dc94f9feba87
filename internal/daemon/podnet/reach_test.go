package podnet

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// inNS runs fn on a fresh goroutine whose locked thread has entered the
// network namespace at path; the thread is discarded afterwards. Sockets fn
// creates stay in that namespace wherever they are used later.
func inNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = h.Close() }()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// ping proves a round trip: a UDP datagram from a socket in fromNS to dst,
// answered by a socket bound to dst in the namespace that holds dst. The
// echo side is found by trying to bind dst in each candidate namespace.
func ping(t *testing.T, fromNS, dst string, holders ...string) {
	t.Helper()
	if err := udpRoundTrip(fromNS, netip.MustParseAddr(dst), holders); err != nil {
		t.Errorf("%s -> %s: %v", filepath.Base(fromNS), dst, err)
	}
}

func udpRoundTrip(fromNS string, dst netip.Addr, holders []string) error {
	var srv *net.UDPConn
	for _, ns := range holders {
		if err := inNS(ns, func() (err error) {
			srv, err = net.ListenUDP("udp", &net.UDPAddr{IP: dst.AsSlice()})
			return err
		}); err == nil {
			break
		}
	}
	if srv == nil {
		return fmt.Errorf("no namespace holds %s", dst)
	}
	defer func() { _ = srv.Close() }()
	go echo(srv)
	var cli *net.UDPConn
	if err := inNS(fromNS, func() (err error) {
		cli, err = net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer func() { _ = cli.Close() }()
	msg := []byte("estuary")
	buf := make([]byte, 64)
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
	return fmt.Errorf("no echo: %w", err)
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
