//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestNodePathIsolatesNewPod runs API server, manager controllers, a node
// daemon enforcing network policy and the real plugin binary: when the ADD
// of a pod under an ingress default-deny NetworkPolicy returns, the pod's
// ingress verdict is already in the node's table (its chain, or pending
// while it is computed), and it ends as the pod's own chain; the ADD of a
// pod no policy selects ends with no entry (admitted).
func TestNodePathIsolatesNewPod(t *testing.T) {
	requirements(t)
	cfg, k8s := startAPIServer(t, false)
	startManager(t, cfg, k8s.Scheme())
	overlay(t, k8s, "it-overlay", "10.200.0.0/24")

	dir := t.TempDir()
	n := &node{k8s: k8s, host: fakeHost(t), health: freeAddr(t)}
	n.cfg = daemon.Config{
		NodeName:        nodeName,
		Kube:            cfg,
		SocketPath:      filepath.Join(dir, "run", "cni.sock"),
		StatePath:       filepath.Join(dir, "lib", "state.db"),
		CNIBinDir:       filepath.Join(dir, "opt", "cni", "bin"),
		CNIConfDir:      filepath.Join(dir, "etc", "cni", "net.d"),
		CNIBinarySource: buildCNI(t),
		AddressTimeout:  addressTimeout,
		HostNetns:       n.host,
		HealthAddr:      n.health,
		NetworkPolicy:   true,
	}
	n.stop = startDaemon(t, n.cfg)
	n.testInstalled(t)
	table, err := ops.OpenPolicy(n.host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(table.Close)
	read := func() policy.Table {
		tab, err := table.Read()
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}

	isolated := newPod(t, k8s, "isolated")
	denyIngress(t, k8s, isolated.Namespace)
	free := newPod(t, k8s, "free")
	boundAddress(t, k8s, isolated)
	boundAddress(t, k8s, free)

	n.call("ADD", "it-isolated", nstest.New(t), isolated).run(t).ok(t, "ADD")
	veth := podnet.HostVethName("it-isolated", "eth0")
	if got := read().Ingress[veth]; got != policy.IngressChain(veth) && got != policy.PendingChain {
		t.Fatalf("when ADD returned, the ingress map sends %s to %q; want its chain or %s", veth, got, policy.PendingChain)
	}
	testenv.Eventually(t, "the isolated pod's own chain", 30*time.Second, func() error {
		tab := read()
		if tab.Ingress[veth] != policy.IngressChain(veth) || tab.Egress[veth] != "" {
			return fmt.Errorf("ingress %q, egress %q", tab.Ingress[veth], tab.Egress[veth])
		}
		return nil
	})

	n.call("ADD", "it-free", nstest.New(t), free).run(t).ok(t, "ADD")
	freeVeth := podnet.HostVethName("it-free", "eth0")
	testenv.Eventually(t, "no entry for the pod no policy selects", 30*time.Second, func() error {
		tab := read()
		if e, ok := tab.Ingress[freeVeth]; ok {
			return fmt.Errorf("ingress entry %q", e)
		}
		if e, ok := tab.Egress[freeVeth]; ok {
			return fmt.Errorf("egress entry %q", e)
		}
		return nil
	})
}
