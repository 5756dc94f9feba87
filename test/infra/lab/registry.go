package lab

// The lab's registry: estuary is installed as a user installs a release.
//
// `up --cni estuary` runs the distribution registry (hack/registry.sh) in
// the control-plane namespace on port RegistryPort, relays a loopback port
// of the host to it, releases the checkout there with make release's code
// (internal/release: the images for this machine's platform and the chart
// as an OCI artifact), and installs the chart with
// `helm install oci://127.0.0.1:<port>/estuary/charts/estuary --version X`.
// No estuary image is imported into a node: each node's containerd pulls
// them. The host knows the registry as 127.0.0.1:<port>, the name the
// release gives the images; inside the lab that name means the node
// itself, so every containerd is configured (config_path, hosts.toml) to
// reach that name at the registry's address on the switch, over plain
// HTTP.

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// RegistryPort is the registry's port on the control plane's address.
const RegistryPort = 5000

// registryPath is the path below the registry the release goes to:
// <registry>/estuary/estuary-manager, <registry>/estuary/charts/estuary.
const registryPath = "estuary"

// registryDir holds the registry's configuration, storage and the hosts
// configuration the nodes' containerd reads.
func (p Paths) registryDir() string { return filepath.Join(p.Root, "registry") }

// RegistryHostsDir is the containerd config_path of every node.
func (p Paths) RegistryHostsDir() string { return filepath.Join(p.registryDir(), "hosts.d") }

// registryHostAddr is the registry's address on the host: the port after
// the API server's.
func (l *Lab) registryHostAddr() string { return fmt.Sprintf("127.0.0.1:%d", l.opts.HostAPIPort+1) }

// registryLabAddr is the registry's address inside the lab.
func (l *Lab) registryLabAddr() string {
	return netip.AddrPortFrom(l.plan.ControlPlane.Addr, RegistryPort).String()
}

// writeRegistryHosts writes the hosts.toml that sends the host's name of the
// registry to its address in the lab (the host's name, a loopback port of
// the host, is never reachable from a node). The host table is written
// inline: the TOML parser of Debian's containerd 1.6 refuses a table header
// keyed by an IPv6 address ([host."http://[fd77::2]:5000"]: "table key
// cannot contain ']'"), and without a host table it refuses the file.
func (l *Lab) writeRegistryHosts() error {
	dir := filepath.Join(l.paths.RegistryHostsDir(), l.registryHostAddr())
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	hosts := registryHostsTOML("http://" + l.registryLabAddr())
	p := filepath.Join(dir, "hosts.toml")
	if err := os.WriteFile(p, []byte(hosts), 0o644); err != nil { //nolint:gosec // G306: containerd reads it
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// registryHostsTOML is containerd's hosts.toml for a registry served at url.
func registryHostsTOML(url string) string {
	return fmt.Sprintf("server = %q\n\nhost = { %q = { capabilities = [\"pull\", \"resolve\"] } }\n", url, url)
}

// startRegistry runs the registry in the control-plane namespace and its
// relay on the host's loopback, and waits until /v2/ answers through it.
func (l *Lab) startRegistry(ctx context.Context, bin string) error {
	dir := l.paths.registryDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"+
		"storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %q\n",
		filepath.Join(dir, "data"), l.registryLabAddr())
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", cfgPath, err)
	}
	reg, err := l.start(l.spec("registry", cgroupOf("control-plane"), l.plan.ControlPlane.NetNS, bin, "serve", cfgPath))
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find lab binary: %w", err)
	}
	fwd, err := l.start(l.spec("registry-forwarder", cgroupOf("forwarder"), "", self, netlab.ForwardCommand,
		l.registryHostAddr(), netlab.Path(l.plan.ControlPlane.NetNS), l.registryLabAddr()))
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + l.registryHostAddr() + "/v2/"
	return reg.WaitReady(ctx, "serving "+url, func() error {
		if fwd.Exited() {
			return fmt.Errorf("registry forwarder exited: %s", proc.Tail(fwd.Log, 5))
		}
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}
