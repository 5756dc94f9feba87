//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/test/infra/lab/images"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// chainedSysctl is the pod sysctl the chained tuning plugin sets: 0 in a
// new network namespace.
const chainedSysctl = "net/ipv4/conf/eth0/accept_local"

// TestChainedTuningPlugin: the daemon installs the reference tuning plugin
// (the static build its image carries) and lists the configured tuning
// entry after estuary and portmap in a cniVersion 1.0.0 conflist. The
// runtime's CNI library (libcni, as containerd runs it) runs that conflist
// from the bin dir: estuary's result, passed to tuning as prevResult, names
// the pod's interface (CNI_IFNAME, sandbox the pod's netns, every address
// pointing at it), tuning sets the sysctl in the pod's namespace and passes
// the result on unchanged, and DEL runs through the chain. Uninstall
// removes the conflist and the tuning binary.
func TestChainedTuningPlugin(t *testing.T) {
	plugins, cfg, k8s := chainEnv(t, "chain-overlay", "10.202.0.0/24")

	chained, err := daemon.ParseChainedPlugins(`[{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.accept_local":"1"}}]`)
	if err != nil {
		t.Fatal(err)
	}
	host := fakeHost(t)
	dcfg := daemon.Config{
		NodeName:          nodeName,
		Kube:              cfg,
		CNIBinarySource:   buildCNI(t),
		CNIExtraPlugins:   []string{filepath.Join(plugins, "portmap"), filepath.Join(plugins, "tuning")},
		CNIChainedPlugins: chained,
		CNIVersion:        "1.0.0",
		AddressTimeout:    addressTimeout,
		HostNetns:         host,
		HealthAddr:        freeAddr(t),
	}
	inTempDir(t, &dcfg)
	stop := startDaemon(t, dcfg)

	list, err := libcni.ConfListFromFile(filepath.Join(dcfg.CNIConfDir, daemon.ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range list.Plugins {
		kinds = append(kinds, p.Network.Type)
	}
	if strings.Join(kinds, ",") != "estuary,portmap,tuning" || list.CNIVersion != "1.0.0" {
		t.Fatalf("conflist %s: plugins %v, cniVersion %s; want estuary, portmap, tuning at 1.0.0", list.Bytes, kinds, list.CNIVersion)
	}

	pod, netns := newPod(t, k8s, "tuned-0"), nstest.New(t)
	boundAddress(t, k8s, pod)
	if v, err := sysctl.Read(netns, "net/ipv4/conf/default/accept_local"); err != nil || v != "0" {
		t.Fatalf("accept_local default in a new namespace = %q, %v; want 0", v, err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{dcfg.CNIBinDir}, t.TempDir(), nil)
	rt := &libcni.RuntimeConf{ContainerID: "it-chain-tuned", NetNS: netns, IfName: "eth0", Args: [][2]string{
		{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", pod.Namespace}, {"K8S_POD_NAME", pod.Name}, {"K8S_POD_UID", string(pod.UID)}}}
	ctx, cancel := context.WithTimeout(bg(), time.Minute)
	defer cancel()
	var res types.Result
	if err := nsrun.Do(host, func() (err error) { res, err = cni.AddNetworkList(ctx, list, rt); return err }); err != nil {
		t.Fatalf("ADD through the chain: %v", err)
	}
	checkNamesPodInterface(t, res, netns)
	if v, err := sysctl.Read(netns, chainedSysctl); err != nil || v != "1" {
		t.Errorf("%s in the pod = %q, %v; want 1 (set by the chained tuning plugin)", chainedSysctl, v, err)
	}
	if err := nsrun.Do(host, func() error { return cni.DelNetworkList(ctx, list, rt) }); err != nil {
		t.Fatalf("DEL through the chain: %v", err)
	}
	if out, err := tryIP(host, "link", "show", podnet.HostVethName(rt.ContainerID, "eth0")); err == nil {
		t.Errorf("host veth still there after DEL:\n%s", out)
	}
	checkUninstallRemovesChain(t, dcfg, stop)
}

// checkUninstallRemovesChain stops the daemon and uninstalls estuary from
// the node: the conflist and the tuning binary the daemon installed (there
// was none before) are gone.
func checkUninstallRemovesChain(t *testing.T, cfg daemon.Config, stop func() error) {
	t.Helper()
	tuning, conflist := filepath.Join(cfg.CNIBinDir, "tuning"), filepath.Join(cfg.CNIConfDir, daemon.ConflistName)
	if _, err := os.Stat(tuning); err != nil {
		t.Fatalf("tuning binary before uninstall: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("daemon stop: %v", err)
	}
	if _, err := daemon.Uninstall(bg(), cfg); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	for _, p := range []string{tuning, conflist} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after uninstall: %v, want it gone", p, err)
		}
	}
}

// chainEnv builds the reference plugins the daemon image carries and
// starts an API server and the manager with an Overlay network of cidr:
// what a test of a plugin chain needs before its daemon.
func chainEnv(t *testing.T, network, cidr string) (plugins string, cfg *rest.Config, k8s client.Client) {
	t.Helper()
	requirements(t)
	plugins, err := images.BuildCNIPlugins(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, k8s = startAPIServer(t, false)
	startManager(t, cfg, k8s.Scheme())
	overlay(t, k8s, network, cidr)
	return plugins, cfg, k8s
}

// checkNamesPodInterface requires the chain's result, as the runtime reads
// it, to list the pod's interface as the CNI spec says: eth0 with sandbox
// the pod's netns, and every address's interface index pointing at it.
func checkNamesPodInterface(t *testing.T, res types.Result, netns string) {
	t.Helper()
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(r)
	pod := -1
	for i, itf := range r.Interfaces {
		if itf.Name == "eth0" && itf.Sandbox == netns {
			pod = i
		}
	}
	if pod < 0 || len(r.IPs) == 0 {
		t.Fatalf("result %s: no eth0 with sandbox %s, or no address", raw, netns)
	}
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface != pod {
			t.Errorf("result %s: address %s does not point at interface %d (eth0 in the pod)", raw, ip.Address.String(), pod)
		}
	}
}
