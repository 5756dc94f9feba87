package manager

import (
	"github.com/estuary-cni/estuary/internal/kubeclient"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// A bad --pod-label-selector, --kube-client-qps or --kube-client-burst
// stops the manager at start, naming the flag, before it touches the API.
func TestClientSettingsNameTheFlag(t *testing.T) {
	valid := Config{Kube: &rest.Config{}, Workers: 1, PodLabelSelector: "cni in (estuary),tier!=legacy"}
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"selector syntax", func(c *Config) { c.PodLabelSelector = "cni in estuary" }, `--pod-label-selector="cni in estuary"`},
		{"selector value", func(c *Config) { c.PodLabelSelector = "cni=not a value" }, `--pod-label-selector="cni=not a value"`},
		{"qps", func(c *Config) { c.KubeClientQPS = -1 }, "--kube-client-qps=-1: must be positive"},
		{"burst", func(c *Config) { c.KubeClientBurst = -5 }, "--kube-client-burst=-5: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error naming %q", err, tc.want)
			}
			if err := Run(bg(), c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// The manager's clients are built from a rest.Config carrying the rate
// limit: the flags' values, or controller-runtime's defaults when unset;
// the caller's config is not changed.
func TestManagerConfigCarriesRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name               string
		qps                float32
		burst              int
		wantQPS, wantBurst float32
	}{
		{"set", 75.5, 150, 75.5, 150},
		{"defaults", 0, 0, kubeclient.DefaultQPS, kubeclient.DefaultBurst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := rest.CopyConfig(kube)
			cfg := Config{Kube: orig, Workers: 1, MetricsAddr: "0", ProbeAddr: "0", KubeClientQPS: tc.qps, KubeClientBurst: tc.burst}.withDefaults()
			cfg.Kube = cfg.restConfig()
			mgr, err := newManager(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := mgr.GetConfig()
			if got.QPS != tc.wantQPS || float32(got.Burst) != tc.wantBurst {
				t.Errorf("manager's rest.Config QPS %g burst %d, want %g and %g", got.QPS, got.Burst, tc.wantQPS, tc.wantBurst)
			}
			if orig.QPS != kube.QPS || orig.Burst != kube.Burst {
				t.Errorf("the caller's config changed: QPS %g burst %d", orig.QPS, orig.Burst)
			}
		})
	}
}
