//go:build lab

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// nsHTTPClient makes HTTP requests from inside a network namespace: every
// connection is opened there.
func nsHTTPClient(nsPath string) *http.Client {
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := nsrun.Do(nsPath, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// httpGet fetches url from inside nsPath and returns the body of a 200.
func httpGet(ctx context.Context, nsPath, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := nsHTTPClient(nsPath).Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return string(body), nil
}

// dialFrom asks the netexec server of the pod whose namespace is podNS to
// send request to host:port over protocol (netexec's /dial), and returns the
// single answer.
func dialFrom(ctx context.Context, podNS, protocol, request, host string, port int) (string, error) {
	q := url.Values{"request": {request}, "protocol": {protocol}, "host": {host}, "port": {strconv.Itoa(port)}, "tries": {"1"}}
	body, err := httpGet(ctx, podNS, fmt.Sprintf("http://127.0.0.1:%d/dial?%s", httpPort, q.Encode()))
	if err != nil {
		return "", err
	}
	var r struct {
		Responses []string `json:"responses"`
		Errors    []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return "", fmt.Errorf("parse /dial answer %q: %w", body, err)
	}
	if len(r.Responses) != 1 {
		return "", fmt.Errorf("%s %s to %s:%d: responses %q, errors %q", protocol, request, host, port, r.Responses, r.Errors)
	}
	return r.Responses[0], nil
}

// hostOf is the address part of "host:port" (the whole string otherwise).
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// serveClientIP answers every HTTP request on addr, inside nsPath, with the
// client's address, as netexec's /clientip does.
func serveClientIP(t *testing.T, nsPath, addr string) {
	t.Helper()
	var ln net.Listener
	err := nsrun.Do(nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, nsPath, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.RemoteAddr)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// pinger sends ICMP echo requests from a network namespace to one address
// and records which sequence numbers were answered.
type pinger struct {
	conn *icmp.PacketConn
	dst  *net.IPAddr
	id   int

	mu       sync.Mutex
	sent     int
	answered map[int]bool
}

func newPinger(nsPath, dst string) (*pinger, error) {
	ip := net.ParseIP(dst)
	if ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("ping: %q is not an IPv4 address", dst)
	}
	p := &pinger{dst: &net.IPAddr{IP: ip}, id: rand.IntN(0xffff) + 1, answered: map[int]bool{}}
	err := nsrun.Do(nsPath, func() error {
		var err error
		p.conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ICMP socket in %s: %w", nsPath, err)
	}
	go p.receive()
	return p, nil
}

func (p *pinger) receive() {
	buf := make([]byte, 1500)
	for {
		n, peer, err := p.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		echo, ok := m.Body.(*icmp.Echo)
		if !ok || echo.ID != p.id || peer.String() != p.dst.String() {
			continue
		}
		p.mu.Lock()
		p.answered[echo.Seq] = true
		p.mu.Unlock()
	}
}

func (p *pinger) send() error {
	p.mu.Lock()
	seq := p.sent
	p.sent++
	p.mu.Unlock()
	b, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: p.id, Seq: seq & 0xffff, Data: []byte("estuary-e2e")}}).Marshal(nil)
	if err != nil {
		return err
	}
	_, err = p.conn.WriteTo(b, p.dst)
	return err
}

// stream sends one echo request every interval until stop is closed.
func (p *pinger) stream(interval time.Duration, stop <-chan struct{}) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := p.send(); err != nil {
			return fmt.Errorf("send echo request to %s: %w", p.dst, err)
		}
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
	}
}

// finish waits up to grace for late answers, closes the socket and returns
// how many requests were sent and which went unanswered.
func (p *pinger) finish(grace time.Duration) (sent int, lost []int) {
	deadline := time.Now().Add(grace)
	for {
		p.mu.Lock()
		sent, lost = p.sent, nil
		for seq := range p.sent {
			if !p.answered[seq&0xffff] {
				lost = append(lost, seq)
			}
		}
		p.mu.Unlock()
		if len(lost) == 0 || time.Now().After(deadline) {
			_ = p.conn.Close()
			return sent, lost
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pingBurst sends count echo requests interval apart and returns the
// sequence numbers left unanswered after a second.
func pingBurst(nsPath, dst string, count int, interval time.Duration) ([]int, error) {
	p, err := newPinger(nsPath, dst)
	if err != nil {
		return nil, err
	}
	for i := range count {
		if i > 0 {
			time.Sleep(interval)
		}
		if err := p.send(); err != nil {
			_ = p.conn.Close()
			return nil, err
		}
	}
	_, lost := p.finish(time.Second)
	return lost, nil
}

// checkPing requires count of count echo replies from dst, retrying until
// the path is up.
func checkPing(t *testing.T, what, nsPath, dst string, count int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s: %d of %d ICMP echo requests to %s answered", what, count, count, dst), 2*time.Minute, func(context.Context) error {
		lost, err := pingBurst(nsPath, dst, count, 100*time.Millisecond)
		if err != nil {
			return err
		}
		if len(lost) > 0 {
			return fmt.Errorf("unanswered sequence numbers %v", lost)
		}
		return nil
	})
}

// httpUpload posts size bytes as the multipart file netexec's /upload takes,
// from inside nsPath, over one TCP connection, and wants its 201 Created.
func httpUpload(ctx context.Context, nsPath, u string, size int) error {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	part, err := w.CreateFormFile("file", "payload")
	if err != nil {
		return err
	}
	if _, err := part.Write(bytes.Repeat([]byte{'e'}, size)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	resp, err := nsHTTPClient(nsPath).Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: %s: %s", u, resp.Status, answer)
	}
	return nil
}
