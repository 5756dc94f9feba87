package netlab

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// ForwardCommand is the hidden subcommand of the lab binary that Forward implements.
const ForwardCommand = "_forward"

// Dialer returns a dial function whose sockets are created inside the namespace at
// nsPath (a socket keeps the namespace it was created in).
func Dialer(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := nsrun.Do(nsPath, func() error {
			var err error
			d := net.Dialer{Timeout: 5 * time.Second}
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// Forward accepts TCP connections on listen (in the caller's namespace) and
// relays each to target dialled inside the namespace at nsPath. It runs until the
// listener fails.
func Forward(listen, nsPath, target string) error {
	ln, err := listenRetry(listen, 10*time.Second)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	dial := Dialer(nsPath)
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("accept on %s: %w", listen, err)
		}
		go relay(c, dial, target)
	}
}

// listenRetry listens on addr, retrying for up to d while the port is still
// held (a previous lab's relayed connections closing down).
func listenRetry(addr string, d time.Duration) (net.Listener, error) {
	deadline := time.Now().Add(d)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return ln, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func relay(c net.Conn, dial func(context.Context, string, string) (net.Conn, error), target string) {
	defer func() { _ = c.Close() }()
	u, err := dial(context.Background(), "tcp", target)
	if err != nil {
		return
	}
	defer func() { _ = u.Close() }()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go pipe(u, c)
	go pipe(c, u)
	wg.Wait()
}
