package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// uninstallCommand is the subcommand that takes estuary off the node.
const uninstallCommand = "uninstall"

// uninstallMain runs `estuary-daemon uninstall [flags]` and returns the exit
// code: 0 done, 1 failed or refused, 2 bad usage.
func uninstallMain(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet(uninstallCommand, flag.ContinueOnError)
	fs.SetOutput(errOut)
	var cfg daemon.Config
	fs.StringVar(&cfg.SocketPath, "socket", cniserver.DefaultSocketPath, "unix socket of the daemon")
	fs.StringVar(&cfg.StatePath, "state-db", endpointstore.DefaultPath, "endpoint state database")
	fs.StringVar(&cfg.CNIBinDir, "cni-bin-dir", daemon.DefaultCNIBinDir, "directory the CNI plugin binary was installed into")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", daemon.DefaultCNIConfDir, "directory the conflist was written into")
	fs.StringVar(&cfg.RTTablesDir, "rt-tables-dir", "", "directory the routing table names were written into (empty: none were)")
	fs.StringVar(&cfg.ProcSysDir, "proc-sys-dir", "", "directory to restore kernel settings in, instead of /proc/sys (a writable mount of the host's when run in a container that is not privileged)")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(errOut, "usage: estuary-daemon %s [flags]: take estuary off this node (the daemon must be stopped)\n", uninstallCommand)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: unexpected arguments %q\n", uninstallCommand, fs.Args())
		return 2
	}
	if daemonAnswers(cfg.SocketPath) {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: a daemon answers on %s: uninstall the release (helm uninstall) or stop the daemon first\n",
			uninstallCommand, cfg.SocketPath)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report, err := daemon.Uninstall(ctx, cfg)
	_, _ = fmt.Fprintln(out, report.String())
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-daemon %s: %v\n", uninstallCommand, err)
		return 1
	}
	return 0
}

// daemonAnswers reports whether a daemon accepts connections on socket.
func daemonAnswers(socket string) bool {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
