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

// TestAdminNetworkPoliciesServed: against a real API server the daemon
// sees AdminNetworkPolicy and BaselineAdminNetworkPolicy each only once its
// v1alpha1 CRD is installed.
func TestAdminNetworkPoliciesServed(t *testing.T) {
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
	check := func(wantANP, wantBANP bool) {
		t.Helper()
		dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		anp, banp, err := adminNetworkPoliciesServed(restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)))
		if err != nil {
			t.Fatalf("adminNetworkPoliciesServed: %v", err)
		}
		if anp != wantANP || banp != wantBANP {
			t.Fatalf("served: AdminNetworkPolicy %v, BaselineAdminNetworkPolicy %v; want %v, %v", anp, banp, wantANP, wantBANP)
		}
	}
	check(false, false)
	dir := filepath.Join("..", "..", "test", "crd", "policy-v1alpha1")
	for i, name := range []string{"adminnetworkpolicies", "baselineadminnetworkpolicies"} {
		crd := filepath.Join(dir, "policy.networking.k8s.io_"+name+".yaml")
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
			t.Fatalf("install %s: %v", crd, err)
		}
		check(true, i == 1)
	}
}
