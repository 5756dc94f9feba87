package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	endpointsv1 "github.com/estuary-cni/estuary/api/endpoints/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// EndpointsCommandName is the estuary-daemon subcommand that prints the
// running daemon's endpoints.
const EndpointsCommandName = "endpoints"

// DefaultHealthAddress is the daemon's --health-probe-bind-address by
// default, and the chart's daemon.bindAddress and healthPort: the node's
// loopback, so the pods of the node (it runs in the node's network) cannot
// reach the health server.
const DefaultHealthAddress = "127.0.0.1:9782"

// DefaultEndpointsAddress is where `estuary-daemon endpoints` reads the
// health server by default.
const DefaultEndpointsAddress = DefaultHealthAddress

// serveEndpoints writes the endpoint store, read-only, as JSON: the node
// and every endpoint's pod, container, interface and addresses.
func (h *health) serveEndpoints(w http.ResponseWriter, _ *http.Request) {
	eps, err := h.endpoints.List()
	if err != nil {
		http.Error(w, "read endpoint store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	list := endpointsv1.NodeEndpointList{Node: h.node, Endpoints: make([]endpointsv1.Endpoint, 0, len(eps))}
	for _, ep := range eps {
		list.Endpoints = append(list.Endpoints, endpointView(ep))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// loopbackOnly serves next only to a peer on the node's loopback
// (127.0.0.0/8, ::1, or an IPv4-mapped loopback address) and answers 403 to
// every other: /endpoints names every pod of the node and /bgp the peers,
// and they stay on the node even when --health-probe-bind-address opens
// the health server (/healthz, /metrics) to the network.
func loopbackOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !loopbackPeer(r.RemoteAddr) {
			http.Error(w, r.URL.Path+" answers only the node's loopback", http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

// loopbackPeer reports whether a request's remote address is a loopback
// address.
func loopbackPeer(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func endpointView(ep endpointstore.Endpoint) endpointsv1.Endpoint {
	return endpointsv1.Endpoint{PodNamespace: ep.PodNamespace, PodName: ep.PodName, PodUID: ep.PodUID,
		ContainerID: ep.ContainerID, IfName: ep.IfName, Network: ep.Network, IPs: ep.IPs,
		Created: ep.Created, Recovered: ep.Recovered}
}

// EndpointsMain runs `estuary-daemon endpoints [--health-address ADDR]`:
// it reads /endpoints from the daemon's health server on this node and
// writes the JSON to out. It returns the process exit code.
func EndpointsMain(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet(EndpointsCommandName, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(errOut, "usage: estuary-daemon %s [flags]: print the endpoints the daemon on this node plumbed, as JSON\n", EndpointsCommandName)
		fs.PrintDefaults()
	}
	addr := fs.String("health-address", DefaultEndpointsAddress,
		"the daemon's --health-probe-bind-address; an unspecified host (\":9782\", \"0.0.0.0:9782\") is read on loopback")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the daemon's answer")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: unexpected arguments %q\n", EndpointsCommandName, fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	list, err := FetchEndpoints(ctx, *addr)
	if err == nil {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(list)
	}
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: %v\n", EndpointsCommandName, err)
		return 1
	}
	return 0
}

// FetchEndpoints reads /endpoints from the health server bound to addr.
func FetchEndpoints(ctx context.Context, addr string) (endpointsv1.NodeEndpointList, error) {
	var list endpointsv1.NodeEndpointList
	err := fetchLoopbackJSON(ctx, addr, "/endpoints", "the daemon's endpoints", &list)
	return list, err
}

// maxServedJSON bounds what fetchLoopbackJSON reads of an answer.
const maxServedJSON = 64 << 20

// fetchLoopbackJSON decodes into v the JSON that the health server bound
// to addr serves at path, over the node's loopback; what names the
// document in errors.
func fetchLoopbackJSON(ctx context.Context, addr, path, what string, v any) error {
	host, err := loopbackFor(addr)
	if err != nil {
		return err
	}
	url := "http://" + host + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("get %s: %s: %s", url, resp.Status, body)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxServedJSON)).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", url, err)
	}
	return nil
}

// loopbackFor is the address to dial for a server bound to addr: an
// unspecified host becomes the loopback of its family.
func loopbackFor(addr string) (string, error) {
	if addr == "" || addr == "0" {
		return "", fmt.Errorf("health address %q: the daemon serves no health endpoint", addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("health address %q: %w", addr, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}
