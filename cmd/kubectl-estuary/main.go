// Command kubectl-estuary is the kubectl plugin `kubectl estuary` (install
// the binary on the PATH): see who holds a pod address, what a workload
// holds, how full the subnets are; reserve addresses for a workload; release
// an address; check and repair the address records. The commands are
// internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/estuary-cni/estuary/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := cli.NewRoot(cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, nil)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubectl estuary:", err)
	}
	os.Exit(cli.ExitCode(err))
}
