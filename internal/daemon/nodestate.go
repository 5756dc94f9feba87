package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/nodesnap"
	"github.com/estuary-cni/estuary/internal/version"
)

// NodeStateCommandName is the estuary-daemon subcommand that prints the
// node's networking state (kubectl estuary sysdump runs it in each daemon
// pod; the image has no shell and no iproute2).
const NodeStateCommandName = "node-state"

// maxFileBytes bounds a file node-state prints.
const maxFileBytes = 1 << 20

// NodeStateMain runs `estuary-daemon node-state [flags]`: it prints the
// node's kernel state (package nodesnap), the running daemon's endpoint
// store and BGP peers (read from its health server), its conflist and its
// node journal, as text or JSON. A part that cannot be read is reported in
// its section; the exit code is 0 once the report is written, 2 on bad
// usage.
func NodeStateMain(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet(NodeStateCommandName, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(errOut, "usage: estuary-daemon %s [flags]: print this node's links, addresses, rules, routes, "+
			"neighbours, FDB, tc, nftables, sysctls and the daemon's endpoints and BGP peers\n", NodeStateCommandName)
		fs.PrintDefaults()
	}
	var (
		addr      = fs.String("health-address", DefaultEndpointsAddress, "the daemon's --health-probe-bind-address (its /endpoints and /bgp are read)")
		confDir   = fs.String("cni-conf-dir", DefaultCNIConfDir, "the daemon's --cni-conf-dir (its conflist is printed)")
		stateDB   = fs.String("state-db", endpointstore.DefaultPath, "the daemon's --state-db (the node journal beside it is printed)")
		node      = fs.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default: $NODE_NAME)")
		output    = fs.String("o", "text", "text or json")
		timeout   = fs.Duration("timeout", 10*time.Second, "how long to wait for the daemon's health server")
		hostNetns = fs.String("netns", "", "network namespace to read (default: the process's own, the node's in the daemon pod)")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || (*output != "text" && *output != "json") {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: want no arguments and -o text or json, got %q and -o %q\n", NodeStateCommandName, fs.Args(), *output)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r := nodesnap.Collect(ctx, nodesnap.CollectOptions{
		Node: *node, Version: version.Line("estuary-daemon"), Netns: *hostNetns,
		Extra: daemonSources(*addr, filepath.Join(*confDir, ConflistName), filepath.Join(filepath.Dir(*stateDB), JournalName)),
	})
	var err error
	if *output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = r.WriteText(out)
	}
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: %v\n", NodeStateCommandName, err)
		return 1
	}
	return 0
}

// daemonSources are the sections the daemon adds to the kernel's.
func daemonSources(addr, conflist, journal string) []nodesnap.Source {
	return []nodesnap.Source{
		{Name: "endpoints", Read: func(ctx context.Context) ([]string, error) { return endpointLines(ctx, addr) }},
		{Name: "bgp", Read: func(ctx context.Context) ([]string, error) { return bgpLines(ctx, addr) }},
		{Name: "file " + conflist, Read: func(context.Context) ([]string, error) { return fileLines(conflist, true) }},
		{Name: "file " + journal, Read: func(context.Context) ([]string, error) { return fileLines(journal, false) }},
	}
}

// endpointLines is the daemon's endpoint store, a line per endpoint.
func endpointLines(ctx context.Context, addr string) ([]string, error) {
	list, err := FetchEndpoints(ctx, addr)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Endpoints))
	for _, e := range list.Endpoints {
		l := fmt.Sprintf("%s/%s uid %s container %s if %s network %s ips %s created %s",
			e.PodNamespace, e.PodName, e.PodUID, e.ContainerID, e.IfName, e.Network, strings.Join(e.IPs, ","), e.Created.UTC().Format(time.RFC3339))
		if e.Recovered {
			l += " recovered"
		}
		out = append(out, l)
	}
	return out, nil
}

// bgpLines is the daemon's /bgp (the BGP peers' sessions) as indented JSON;
// a daemon without a BGP network serves none.
func bgpLines(ctx context.Context, addr string) ([]string, error) {
	host, err := loopbackFor(addr)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/bgp", nil)
	if err != nil {
		return nil, fmt.Errorf("request /bgp: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the daemon's BGP peers: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFileBytes))
	if err != nil {
		return nil, fmt.Errorf("read the daemon's BGP peers: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return []string{"no BGP speaker on this node"}, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("get /bgp: %s: %s", resp.Status, body)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("decode /bgp: %w", err)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return strings.Split(string(b), "\n"), nil
}

// fileLines is a file's content, its first maxFileBytes. A missing file is
// an error when it must exist, else one line saying so.
func fileLines(path string, required bool) ([]string, error) {
	f, err := os.Open(path) // #nosec G304 -- the daemon's own files, named by its flags
	if errors.Is(err, fs.ErrNotExist) && !required {
		return []string{"(absent)"}, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n"), nil
}
