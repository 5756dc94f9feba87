package daemon

import (
	"github.com/estuary-cni/estuary/internal/kubeclient"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestClientRateLimitNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"qps", func(c *Config) { c.KubeClientQPS = -0.5 }, "--kube-client-qps=-0.5: must be positive"},
		{"burst", func(c *Config) { c.KubeClientBurst = -1 }, "--kube-client-burst=-1: must be positive"},
	} {
		c := validConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// RESTConfig, which every client of the daemon is built from, carries the
// rate limit (or controller-runtime's defaults) and leaves Kube as it was.
func TestRESTConfigCarriesRateLimit(t *testing.T) {
	kube := &rest.Config{Host: "https://api.example:6443", QPS: 5, Burst: 10}
	c := Config{Kube: kube, KubeClientQPS: 40, KubeClientBurst: 80}
	if got := c.RESTConfig(); got.QPS != 40 || got.Burst != 80 || got.Host != kube.Host {
		t.Errorf("RESTConfig QPS %g burst %d host %q, want 40, 80, %q", got.QPS, got.Burst, got.Host, kube.Host)
	}
	if kube.QPS != 5 || kube.Burst != 10 {
		t.Errorf("Kube changed to QPS %g burst %d", kube.QPS, kube.Burst)
	}
	c = Config{Kube: kube}
	if got := c.RESTConfig(); got.QPS != kubeclient.DefaultQPS || got.Burst != kubeclient.DefaultBurst {
		t.Errorf("unset: RESTConfig QPS %g burst %d, want %d and %d", got.QPS, got.Burst, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	}
	if (Config{}).RESTConfig() != nil {
		t.Error("RESTConfig without Kube is not nil")
	}
}
