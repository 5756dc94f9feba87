package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	kube *rest.Config
	k8s  client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(c *rest.Config, cl client.Client) (func(), error) {
		kube, k8s = c, cl
		return nil, nil
	}))
}

func bg() context.Context { return context.Background() }

func TestValidateNamesTheFlag(t *testing.T) {
	valid := Config{Kube: &rest.Config{}, Workers: 1}
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no kubeconfig", func(c *Config) { c.Kube = nil }, "--kubeconfig"},
		{"workers", func(c *Config) { c.Workers = 0 }, "--workers=0: must be at least 1"},
		{"max retain ttl", func(c *Config) { c.MaxRetainTTL = -time.Hour }, "--max-retain-ttl=-1h0m0s: must be a positive duration"},
		{"address history entries", func(c *Config) { c.AddressHistoryMaxEntries = 1001 }, "--address-history-max-entries=1001: must be 1 to 1000"},
		{"address history age", func(c *Config) { c.AddressHistoryMaxAge = -time.Hour }, "--address-history-max-age=-1h0m0s: must be a positive duration"},
		{"port", func(c *Config) { c.Webhook.Port = 70000 }, "--webhook-port=70000"},
		{"secret", func(c *Config) { c.Webhook.Port, c.Webhook.Secret = 9443, "nons" }, `--webhook-cert-secret="nons": want namespace/name`},
		{"secret without port", func(c *Config) { c.Webhook.Secret = "ns/s" }, "needs --webhook-port"},
		{"owner without dir", func(c *Config) { c.BootstrapOwner = "ClusterRole.rbac.authorization.k8s.io/x" }, "needs --bootstrap-dir"},
		{"default network type", func(c *Config) { c.DefaultNetworkType = "VXLAN" }, `--default-network-type=VXLAN: "VXLAN" is not Overlay or Underlay`},
		{"default ip family", func(c *Config) { c.DefaultIPFamily = "IPv4Only" }, `--default-ip-family=IPv4Only: "IPv4Only" is not one of IPv4, IPv6, DualStack, Network`},
		{"default ip retain", func(c *Config) { c.DefaultIPRetain = "maybe" }, `--default-ip-retain=maybe: "maybe" is not true or false`},
		{"workload kinds", func(c *Config) {
			c.WorkloadKinds = `[{"group":"apps.kruise.io","version":"v1alpha1","kind":"CloneSet"},{"group":"argoproj.io","kind":"Rollout"}]`
		}, `--workload-kinds: entry 1 ({"group":"argoproj.io","kind":"Rollout"}): version: required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error naming %q", err, tc.want)
			}
			// Run refuses the same configuration before touching the API.
			if err := Run(bg(), c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// TestRunLeadsAllocatesAndStops: Run with leader election becomes ready once
// it leads and has rebuilt its allocator, gives a scheduled pod an address
// (an IPInstance), and on cancel returns nil and releases its Lease.
func TestRunLeadsAllocatesAndStops(t *testing.T) {
	probe, metrics := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(bg())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Kube: kube, MetricsAddr: metrics, ProbeAddr: probe, LeaderElect: true, UpgradeCRDs: true,
			LeaderElectionNamespace: "default", Workers: 2})
	}()
	testenv.Eventually(t, "readyz answers 200", time.Minute, func() error {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: "default", Name: LeaderElectionID}
	testenv.Eventually(t, "the Lease names a holder", 30*time.Second, func() error {
		if err := k8s.Get(bg(), key, lease); err != nil {
			return err
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
			return errors.New("no holder")
		}
		return nil
	})

	nw := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "run-overlay"},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](7)}}
	sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "run-overlay-v4"},
		Spec: estuaryv1.SubnetSpec{Network: nw.Name, Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.77.0.0/24"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "run-node"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "run-pod"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	for _, o := range []client.Object{nw, sn, node, pod} {
		if err := k8s.Create(bg(), o); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = k8s.Delete(bg(), o, client.GracePeriodSeconds(0)) }()
	}
	testenv.Eventually(t, "the pod's address is recorded", time.Minute, func() error {
		var list estuaryv1.IPInstanceList
		if err := k8s.List(bg(), &list); err != nil {
			return err
		}
		for _, ipi := range list.Items {
			if ipi.Spec.Binding.PodName == pod.Name && ipi.Spec.Subnet == sn.Name {
				return nil
			}
		}
		return fmt.Errorf("no IPInstance of pod %s among %d", pod.Name, len(list.Items))
	})
	testenv.Eventually(t, "/metrics serves the subnet's capacity and disjoint address states", 30*time.Second, func() error {
		return subnetMetrics(metrics, sn.Name)
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of cancel")
	}
	if err := k8s.Get(bg(), key, lease); err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
		t.Fatalf("Lease still held by %q after a clean stop", h)
	}
}

// subnetMetrics scrapes the manager's /metrics and checks subnet's IPAM
// series: a capacity, one used address, and used, reserved and available
// adding up to the capacity, with no state that counts an address twice.
func subnetMetrics(addr, subnet string) error {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	values := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || strings.HasPrefix(series, "#") || !strings.Contains(series, `subnet="`+subnet+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", line, err)
		}
		values[series] = v
	}
	capacity, ok := values[`estuary_ipam_subnet_capacity_addresses{subnet="`+subnet+`"}`]
	if !ok {
		return fmt.Errorf("no capacity of subnet %s among %v", subnet, values)
	}
	sum := 0.0
	for series, v := range values {
		if strings.HasPrefix(series, "estuary_ipam_addresses{") {
			if !strings.Contains(series, `state="used"`) && !strings.Contains(series, `state="reserved"`) &&
				!strings.Contains(series, `state="available"`) {
				return fmt.Errorf("unexpected state in %s", series)
			}
			sum += v
		}
	}
	if used := values[`estuary_ipam_addresses{state="used",subnet="`+subnet+`"}`]; used != 1 {
		return fmt.Errorf("used = %v, want 1 (all: %v)", used, values)
	}
	if sum != capacity {
		return fmt.Errorf("states sum to %v, capacity is %v (all: %v)", sum, capacity, values)
	}
	return nil
}

// TestPodDefaults: the flags' values reach the webhook and the allocator
// as one netmodel.Defaults; the flags' own defaults change nothing.
func TestPodDefaults(t *testing.T) {
	d, err := Config{DefaultNetworkType: DefaultNetworkType, DefaultIPFamily: DefaultIPFamily, DefaultIPRetain: DefaultIPRetain}.PodDefaults()
	if err != nil || d != (netmodel.Defaults{NetworkType: "Overlay", IPFamily: netmodel.IPFamilyNetwork}) {
		t.Errorf("flag defaults = %+v, %v; want Overlay, Network, StatefulSets retain", d, err)
	}
	d, err = Config{DefaultNetworkType: "underlay", DefaultIPFamily: "ipv4", DefaultIPRetain: "false"}.PodDefaults()
	want := netmodel.Defaults{NetworkType: "Underlay", IPFamily: "IPv4", NoStatefulRetain: true}
	if err != nil || d != want {
		t.Errorf("PodDefaults = %+v, %v; want %+v", d, err, want)
	}
}
