//go:build lab

package e2e_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

// hybridnet's pod annotation choosing a network type (its
// pkg/constants: AnnotationNetworkType).
const hybridnetNetworkType = "networking.alibaba.com/network-type"

// needHybridnet returns the lab, or skips the test unless hybridnet is its CNI.
func needHybridnet(t *testing.T) *labEnv {
	t.Helper()
	e := needLab(t)
	if e.hybridnet == nil {
		t.Skip("the lab runs " + e.cni + ", not hybridnet (make test-hybridnet, ESTUARY_E2E_CNI=hybridnet)")
	}
	return e
}

// TestHybridnetOverlayAndUnderlay runs on a lab whose CNI is hybridnet
// itself (built from its source, installed with its own chart): an overlay
// pod on each of two nodes and an underlay pod (its untagged VLAN network on
// the lab's switch) take addresses of their networks, reach each other
// across nodes with their own addresses, and reach the external host:
// the underlay pod without NAT, the overlay pod through its node's SNAT.
// What crosses hybridnet's overlay is skipped, with the reason, on a kernel
// without the tc prio qdisc and pedit action its VXLAN device needs.
func TestHybridnetOverlayAndUnderlay(t *testing.T) {
	e := needHybridnet(t)
	ns := e.newNamespace(t, "hybridnet")
	under := netexecPod("under", "node-2", nil)
	under.Annotations = map[string]string{hybridnetNetworkType: "Underlay"}
	e.mustCreate(t, ns, netexecPod("over1", "node-1", nil), netexecPod("over3", "node-3", nil), under)
	pods := e.waitPods(t, ns, "over1", "over3", "under")
	podCIDR := netip.MustParsePrefix(e.families[0].PodCIDR)
	underCIDR := netip.MustParsePrefix(lab.UnderlayCIDR)

	t.Run("addresses of each network", func(t *testing.T) {
		for name, want := range map[string]netip.Prefix{"over1": podCIDR, "over3": podCIDR, "under": underCIDR} {
			p := pods[name]
			if a, err := netip.ParseAddr(p.Status.PodIP); err != nil || !want.Contains(a) {
				t.Errorf("pod %s on %s has address %q, want one in %s", name, p.Spec.NodeName, p.Status.PodIP, want)
			}
		}
	})

	t.Run("pods reach each other across nodes with their own addresses", func(t *testing.T) {
		// hybridnet's VXLAN device rewrites broadcast destinations with a prio
		// qdisc and a pedit action (its pkg/daemon/vxlan ensureTCRules) and
		// programs nothing else for the overlay when that fails.
		if missing := missingKernelOptions("CONFIG_NET_SCH_PRIO", "CONFIG_NET_ACT_PEDIT"); len(missing) > 0 {
			t.Skipf("hybridnet's overlay needs the kernel's %v, which this kernel lacks (/proc/config.gz)", missing)
		}
		for _, pair := range [][2]string{{"over1", "over3"}, {"over1", "under"}, {"under", "over1"}, {"under", "over3"}} {
			from, to := pods[pair[0]], pods[pair[1]]
			e.expectSeenAs(t, e.podNetns(t, &from), to.Status.PodIP, from.Status.PodIP, pair[0]+" -> "+pair[1])
		}
	})

	t.Run("the external host", func(t *testing.T) {
		serveClientIP(t, e.externalNetns, fmt.Sprintf("%s:%d", e.externalAddr, externalPort))
		u, o := pods["under"], pods["over1"]
		for _, c := range []struct {
			p    corev1.Pod
			want string
		}{{u, u.Status.PodIP}, {o, e.nodeAddr[o.Spec.NodeName]}} {
			if c.p.Name == o.Name && len(missingKernelOptions("CONFIG_NET_SCH_PRIO", "CONFIG_NET_ACT_PEDIT")) > 0 {
				t.Logf("overlay pod %s to the external host: not checked, hybridnet's overlay needs kernel options this kernel lacks", o.Name)
				continue
			}
			podNS := e.podNetns(t, &c.p)
			var seen string
			eventually(t, fmt.Sprintf("pod %s -> external %s", c.p.Name, e.externalAddr), reachTimeout, func(ctx context.Context) error {
				var err error
				seen, err = dialFrom(ctx, podNS, "http", "clientip", e.externalAddr, externalPort)
				return err
			})
			if hostOf(seen) != c.want {
				t.Errorf("the external host saw pod %s as %s, want %s", c.p.Name, seen, c.want)
			}
		}
		var seen string
		eventually(t, "external -> underlay pod", reachTimeout, func(ctx context.Context) error {
			var err error
			seen, err = httpGet(ctx, e.externalNetns, fmt.Sprintf("http://%s:%d/clientip", u.Status.PodIP, httpPort))
			return err
		})
		if hostOf(seen) != e.externalAddr {
			t.Errorf("the underlay pod saw the external host as %s, want %s", seen, e.externalAddr)
		}
	})
}

// missingKernelOptions returns the options of opts that the running
// kernel's configuration (/proc/config.gz) neither builds in nor has as a
// module; none when the configuration cannot be read.
func missingKernelOptions(opts ...string) []string {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil
	}
	var missing []string
	for _, o := range opts {
		if !strings.Contains(string(b), "\n"+o+"=y") && !strings.Contains(string(b), "\n"+o+"=m") {
			missing = append(missing, o)
		}
	}
	return missing
}

// expectSeenAs asks the netexec server at addr, from podNS, which client
// address it saw, and wants want.
func (e *labEnv) expectSeenAs(t *testing.T, podNS, addr, want, what string) {
	t.Helper()
	var seen string
	eventually(t, what, reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = dialFrom(ctx, podNS, "http", "clientip", addr, httpPort)
		return err
	})
	if hostOf(seen) != want {
		t.Errorf("%s: the server saw %s, want %s", what, seen, want)
	}
}
