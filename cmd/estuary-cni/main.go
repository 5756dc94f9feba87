// Command estuary-cni is the CNI plugin the container runtime executes for
// each pod. It holds no state: it forwards every verb to the estuary daemon
// over the node-local unix socket and prints the daemon's answer. Run
// without CNI_COMMAND it fails with a CNI error rather than printing help,
// so that a misconfigured runtime never mistakes it for success. The VERSION
// verb answers the CNI versions it speaks and estuary's version;
// `estuary-cni --version` (an argument, which runtimes never pass) prints
// estuary's version.
package main

import (
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/estuary-cni/estuary/cmd/estuary-cni/internal/plugin"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(plugin.About())
		return
	}
	p := &plugin.Plugin{Stdout: os.Stdout}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    p.Add,
		Del:    p.Del,
		Check:  p.Check,
		Status: p.Status,
		GC:     p.GC,
	}, plugin.NewVersionInfo(), "")
}
