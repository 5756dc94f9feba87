// Command estuary-cni is the CNI plugin the container runtime executes for
// each pod. It holds no state: it forwards every verb to the estuary daemon
// over the node-local unix socket and prints the daemon's answer. Run
// without CNI_COMMAND it fails with a CNI error rather than printing help,
// so that a misconfigured runtime never mistakes it for success.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/estuary-cni/estuary/cmd/estuary-cni/internal/plugin"
)

func main() {
	p := &plugin.Plugin{Stdout: os.Stdout}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    p.Add,
		Del:    p.Del,
		Check:  p.Check,
		Status: p.Status,
		GC:     p.GC,
	}, version.PluginSupports("1.0.0", "1.1.0"), "")
}
