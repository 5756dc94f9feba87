package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/policydrops"
)

// PolicyDropsCommandName is the estuary-daemon subcommand that prints the
// packets this node's policy table dropped most recently (kubectl estuary
// policy drops runs it in each daemon pod with -o json and decodes a
// policydrops.Report).
const PolicyDropsCommandName = "policy-drops"

// PolicyDropsPath is the health server's path of the recent drops, as a
// policydrops.Report in JSON (node's loopback only).
const PolicyDropsPath = "/debug/policy/drops"

// PolicyDropsMain runs `estuary-daemon policy-drops [flags]`: it reads the
// running daemon's recent drops from its health server and prints them as
// JSON (a policydrops.Report) or text, a line per drop, oldest first. It
// takes node-state's flags, so that a caller can pass both the same; the
// ones it has no use for (--cni-conf-dir, --state-db, --netns) are
// accepted and ignored. Exit code 0 once printed, 1 when the daemon could
// not be read, 2 on bad usage.
func PolicyDropsMain(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet(PolicyDropsCommandName, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(errOut, "usage: estuary-daemon %s [flags]: print the packets this node's policy dropped most recently\n",
			PolicyDropsCommandName)
		fs.PrintDefaults()
	}
	var (
		addr    = fs.String("health-address", DefaultEndpointsAddress, "the daemon's --health-probe-bind-address (its "+PolicyDropsPath+" is read)")
		node    = fs.String("node-name", os.Getenv("NODE_NAME"), "this node's name, when the daemon does not say it (default: $NODE_NAME)")
		output  = fs.String("o", "text", "text or json")
		timeout = fs.Duration("timeout", 10*time.Second, "how long to wait for the daemon's health server")
	)
	fs.String("cni-conf-dir", DefaultCNIConfDir, "ignored (node-state's)")
	fs.String("state-db", endpointstore.DefaultPath, "ignored (node-state's)")
	fs.String("netns", "", "ignored (node-state's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || (*output != "text" && *output != "json") {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: want no arguments and -o text or json, got %q and -o %q\n",
			PolicyDropsCommandName, fs.Args(), *output)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r, err := FetchPolicyDrops(ctx, *addr)
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: %v\n", PolicyDropsCommandName, err)
		return 1
	}
	if r.Node == "" {
		r.Node = *node
	}
	if *output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(r)
	} else {
		err = writeDropsText(out, r)
	}
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: %v\n", PolicyDropsCommandName, err)
		return 1
	}
	return 0
}

// FetchPolicyDrops reads the recent drops of the daemon whose health
// server listens on addr, over the node's loopback.
func FetchPolicyDrops(ctx context.Context, addr string) (policydrops.Report, error) {
	var r policydrops.Report
	err := fetchLoopbackJSON(ctx, addr, PolicyDropsPath, "the daemon's policy drops", &r)
	return r, err
}

// writeDropsText prints r a line per drop.
func writeDropsText(w io.Writer, r policydrops.Report) error {
	if _, err := fmt.Fprintf(w, "node %s: %d recent drops, %d older ones let go\n", r.Node, len(r.Drops), r.Lost); err != nil {
		return err
	}
	for _, d := range r.Drops {
		pol := d.Policy
		if pol == "" {
			pol = "isolation"
		}
		src, dst := d.Src, d.Dst
		if d.DstPort != 0 {
			src, dst = fmt.Sprintf("%s:%d", d.Src, d.SrcPort), fmt.Sprintf("%s:%d", d.Dst, d.DstPort)
		}
		who := d.HostVeth
		if d.Pod != "" {
			who = d.Pod + " (" + d.HostVeth + ")"
		}
		if _, err := fmt.Fprintf(w, "%s %s %s %s %s -> %s by %s\n", d.Time.UTC().Format(time.RFC3339Nano), d.Direction,
			who, d.Protocol, src, dst, pol); err != nil {
			return err
		}
	}
	return nil
}
