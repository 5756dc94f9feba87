package datapath

// kube-proxy's mode, and why policy cares.
//
// In IPVS mode kube-proxy delivers a Service connection from a pod to a
// backend on the same node through the IPVS hook on the node's input path
// and sends it out from the output hook: it never crosses the forward hook,
// where the policy table judges what reaches a pod, so the backend's
// ingress rules are skipped. The daemon cannot repair that; it learns the
// mode and says so (the node's daemon status, an Event, the log).
//
// kube-proxy answers GET /proxyMode on its metrics address, by default
// 127.0.0.1:10249 in the node's network namespace, which the daemon shares
// (hostNetwork). When that cannot be asked (another metricsBindAddress),
// the link kube-ipvs0, which only kube-proxy's IPVS mode creates, still
// gives IPVS away.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"
)

const (
	// DefaultProxyModeURL is kube-proxy's /proxyMode at its default
	// metricsBindAddress.
	DefaultProxyModeURL = "http://127.0.0.1:10249/proxyMode"
	// IPVSLink is the link kube-proxy's IPVS mode holds Service addresses on.
	IPVSLink = "kube-ipvs0"
	// ProxyModeIPVS is kube-proxy's name of its IPVS mode.
	ProxyModeIPVS = "ipvs"
	// proxyModeTimeout bounds one question to kube-proxy.
	proxyModeTimeout = 2 * time.Second
)

// proxyModeAnswer is what a /proxyMode answer must look like: a mode name.
var proxyModeAnswer = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// ProxyModeDetector learns which mode kube-proxy on the node runs in.
type ProxyModeDetector struct {
	// URL is kube-proxy's /proxyMode; DefaultProxyModeURL when empty.
	URL string
	// Client asks it; one with a short timeout when nil.
	Client *http.Client
}

// Detect returns kube-proxy's mode as its /proxyMode answers. When
// kube-proxy cannot be asked, it returns ProxyModeIPVS if the node (the
// caller's network namespace) has the link IPVSLink, else the error.
func (d ProxyModeDetector) Detect(ctx context.Context) (string, error) {
	mode, err := d.ask(ctx)
	if err == nil {
		return mode, nil
	}
	if _, lerr := net.InterfaceByName(IPVSLink); lerr == nil {
		return ProxyModeIPVS, nil
	}
	return "", err
}

func (d ProxyModeDetector) ask(ctx context.Context) (string, error) {
	url, c := d.URL, d.Client
	if url == "" {
		url = DefaultProxyModeURL
	}
	if c == nil {
		c = &http.Client{Timeout: proxyModeTimeout}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("kube-proxy mode from %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("kube-proxy mode: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil {
		return "", fmt.Errorf("kube-proxy mode from %s: read: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("kube-proxy mode from %s: %s", url, resp.Status)
	}
	mode := strings.TrimSpace(string(body))
	if !proxyModeAnswer.MatchString(mode) {
		return "", fmt.Errorf("kube-proxy mode from %s: %w: %q", url, errNotAMode, mode)
	}
	return mode, nil
}

var errNotAMode = errors.New("answer is not a mode name")
