package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/estuary-cni/estuary/internal/nodesnap"
)

// NodeSnapshotOptions is what a lab node's snapshot covers besides its
// network state: the directories estuary writes on a node (the chart's
// defaults) and the sysctls of the node's namespace it may change.
var NodeSnapshotOptions = nodesnap.Options{
	Paths: []string{"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/estuary", "/run/estuary", "/etc/iproute2/rt_tables.d"},
	Sysctls: `^net\.(ipv4\.(ip_forward|conf\.(all|default|eth0)\.)|ipv6\.conf\.(all|default|eth0)\.|` +
		`netfilter\.nf_conntrack_tcp_be_liberal)`,
}

// PreInstallSnapshotPath is where `up --cni estuary` keeps node's snapshot
// taken before estuary was installed, in the lab at root.
func PreInstallSnapshotPath(root, node string) string {
	return filepath.Join(Paths{Root: root}.estuaryDir(), "pre-install", node+".json")
}

// NodeRunner runs commands in a lab node's namespaces.
func (l *Lab) NodeRunner(node string) nodesnap.Runner {
	return func(ctx context.Context, argv ...string) (string, error) {
		c, err := l.Command(node, argv)
		if err != nil {
			return "", err
		}
		cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...) //nolint:gosec // G204: the lab's own nsenter command
		var out, errOut bytes.Buffer
		cmd.Env, cmd.Stdout, cmd.Stderr = c.Env, &out, &errOut
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s: %w: %s", node, err, lastLines(errOut.String(), 5))
		}
		return out.String(), nil
	}
}

// snapshotNodes records every node's snapshot before estuary is installed.
func (l *Lab) snapshotNodes(ctx context.Context) error {
	for _, n := range l.plan.Nodes {
		s, err := nodesnap.Take(ctx, l.NodeRunner(n.Name), NodeSnapshotOptions)
		if err != nil {
			return fmt.Errorf("snapshot of %s before the install: %w", n.Name, err)
		}
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return fmt.Errorf("encode snapshot of %s: %w", n.Name, err)
		}
		p := PreInstallSnapshotPath(l.paths.Root, n.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return fmt.Errorf("write snapshot of %s: %w", n.Name, err)
		}
	}
	return nil
}
