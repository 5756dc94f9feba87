package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestClusterPolicyServed: against a real API server without the
// ClusterNetworkPolicy CRD the daemon sees no ClusterNetworkPolicy (and
// enforces NetworkPolicy alone); with the CRD the chart ships installed,
// it sees it served at v1beta1.
func TestClusterPolicyServed(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	served := func() bool {
		t.Helper()
		dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		ok, err := clusterPolicyServed(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)))
		if err != nil {
			t.Fatalf("clusterPolicyServed: %v", err)
		}
		return ok
	}
	if served() {
		t.Fatal("ClusterNetworkPolicy served without its CRD")
	}
	crd := filepath.Join("..", "..", "config", "crd", "policy.networking.k8s.io_clusternetworkpolicies.yaml")
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install %s: %v", crd, err)
	}
	if !served() {
		t.Fatal("ClusterNetworkPolicy not served at v1beta1 with the chart's CRD installed")
	}
}
