// Command flannel is the lab's stand-in for flannel's CNI plugin
// (github.com/flannel-io/cni-plugin, which the Go module proxy does not
// serve). It behaves as that plugin does: it reads the lease flanneld wrote
// (/run/flannel/subnet.env), builds the configuration of the delegate plugin
// (bridge with host-local by default) from it and from the "delegate" object
// of its own configuration, keeps that configuration per container for DEL
// and CHECK, and runs the delegate.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"
)

const (
	defaultSubnetFile = "/run/flannel/subnet.env"
	defaultDataDir    = "/var/lib/cni/flannel"
)

// netConf is the plugin's configuration: the network's name and version, where
// the lease and the per-container delegate configurations are, and what to
// pass to the delegate.
type netConf struct {
	types.NetConf
	SubnetFile string         `json:"subnetFile"`
	DataDir    string         `json:"dataDir"`
	Delegate   map[string]any `json:"delegate"`
}

// lease is what flanneld wrote to the subnet file.
type lease struct {
	networks []string // FLANNEL_NETWORK and FLANNEL_IPV6_NETWORK
	subnets  []string // FLANNEL_SUBNET and FLANNEL_IPV6_SUBNET
	mtu      int
	ipMasq   bool // flanneld masquerades itself
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck},
		cniversion.All, "flannel (estuary lab)")
}

func loadConf(stdin []byte) (*netConf, error) {
	n := &netConf{SubnetFile: defaultSubnetFile, DataDir: defaultDataDir}
	if err := json.Unmarshal(stdin, n); err != nil {
		return nil, fmt.Errorf("parse network configuration: %w", err)
	}
	return n, nil
}

func readLease(path string) (*lease, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, fmt.Errorf("read flannel lease (is flanneld running?): %w", err)
	}
	defer func() { _ = f.Close() }()
	l := &lease{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		switch k {
		case "FLANNEL_NETWORK", "FLANNEL_IPV6_NETWORK":
			for _, c := range strings.Split(v, ",") {
				if _, _, err := net.ParseCIDR(c); err != nil {
					return nil, fmt.Errorf("%s %s=%q: %w", path, k, v, err)
				}
				l.networks = append(l.networks, c)
			}
		case "FLANNEL_SUBNET", "FLANNEL_IPV6_SUBNET":
			_, sn, err := net.ParseCIDR(v)
			if err != nil {
				return nil, fmt.Errorf("%s %s=%q: %w", path, k, v, err)
			}
			l.subnets = append(l.subnets, sn.String())
		case "FLANNEL_MTU":
			if l.mtu, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("%s FLANNEL_MTU=%q: %w", path, v, err)
			}
		case "FLANNEL_IPMASQ":
			l.ipMasq = v == "true"
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(l.subnets) == 0 || len(l.networks) == 0 {
		return nil, fmt.Errorf("%s names no subnet or network", path)
	}
	return l, nil
}

// delegateConf is the delegate's configuration: the delegate object with the
// lease's values filled in where it does not set them, and a host-local IPAM
// over the node's subnets that routes the flannel networks through the pod's
// gateway.
func delegateConf(n *netConf, l *lease) ([]byte, error) {
	d := map[string]any{}
	for k, v := range n.Delegate {
		d[k] = v
	}
	d["name"] = n.Name
	if n.CNIVersion != "" {
		d["cniVersion"] = n.CNIVersion
	}
	setDefault(d, "type", "bridge")
	setDefault(d, "ipMasq", !l.ipMasq)
	setDefault(d, "mtu", l.mtu)
	if d["type"] == "bridge" {
		setDefault(d, "isGateway", true)
	}
	ipam := map[string]any{"type": "host-local"}
	if given, ok := d["ipam"].(map[string]any); ok {
		for k, v := range given {
			ipam[k] = v
		}
	}
	var ranges [][]map[string]string
	for _, s := range l.subnets {
		ranges = append(ranges, []map[string]string{{"subnet": s}})
	}
	routes, _ := ipam["routes"].([]any)
	for _, nw := range l.networks {
		routes = append(routes, map[string]string{"dst": nw})
	}
	ipam["ranges"], ipam["routes"] = ranges, routes
	d["ipam"] = ipam
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode delegate configuration: %w", err)
	}
	return b, nil
}

func setDefault(m map[string]any, k string, v any) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

func savedPath(n *netConf, containerID string) string { return filepath.Join(n.DataDir, containerID) }

func cmdAdd(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	l, err := readLease(n.SubnetFile)
	if err != nil {
		return err
	}
	conf, err := delegateConf(n, l)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", n.DataDir, err)
	}
	if err := os.WriteFile(savedPath(n, args.ContainerID), conf, 0o600); err != nil {
		return fmt.Errorf("keep delegate configuration: %w", err)
	}
	typ, _ := mapString(conf, "type")
	res, err := invoke.DelegateAdd(context.TODO(), typ, conf, nil)
	if err != nil {
		return fmt.Errorf("delegate %s ADD: %w", typ, err)
	}
	return types.PrintResult(res, n.CNIVersion)
}

func cmdDel(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	conf, err := os.ReadFile(filepath.Clean(savedPath(n, args.ContainerID)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never added, or already deleted
	}
	if err != nil {
		return fmt.Errorf("read delegate configuration: %w", err)
	}
	typ, err := mapString(conf, "type")
	if err != nil {
		return err
	}
	if err := invoke.DelegateDel(context.TODO(), typ, conf, nil); err != nil {
		return fmt.Errorf("delegate %s DEL: %w", typ, err)
	}
	if err := os.Remove(savedPath(n, args.ContainerID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove delegate configuration: %w", err)
	}
	return nil
}

func cmdCheck(args *skel.CmdArgs) error {
	n, err := loadConf(args.StdinData)
	if err != nil {
		return err
	}
	conf, err := os.ReadFile(filepath.Clean(savedPath(n, args.ContainerID)))
	if err != nil {
		return fmt.Errorf("read delegate configuration: %w", err)
	}
	typ, err := mapString(conf, "type")
	if err != nil {
		return err
	}
	if err := invoke.DelegateCheck(context.TODO(), typ, conf, nil); err != nil {
		return fmt.Errorf("delegate %s CHECK: %w", typ, err)
	}
	return nil
}

func mapString(conf []byte, key string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(conf, &m); err != nil {
		return "", fmt.Errorf("parse delegate configuration: %w", err)
	}
	s, ok := m[key].(string)
	if !ok || s == "" {
		return "", fmt.Errorf("delegate configuration has no %q", key)
	}
	return s, nil
}
