package policystatus

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	cfg    *rest.Config
	k8s    client.Client
	scheme *runtime.Scheme
	// etcd is the API server's etcd client URL.
	etcd string
)

// TestMain starts an API server with the ClusterNetworkPolicy CRD the
// chart installs (config/crd) and the v1alpha1 AdminNetworkPolicy and
// BaselineAdminNetworkPolicy CRDs generated for tests.
func TestMain(m *testing.M) {
	opts := testenv.Options{CRDDirs: []string{testenv.CRDDir, "test/crd/policy-v1alpha1"},
		AddToScheme: []func(*runtime.Scheme) error{npv1beta1.Install, npv1alpha1.Install}, EtcdURL: &etcd}
	os.Exit(testenv.Main(m, opts, func(c *rest.Config, cl client.Client) (func(), error) {
		cfg, k8s, scheme = c, cl, cl.Scheme()
		return nil, nil
	}))
}

// startManager runs the controllers until the test ends.
func startManager(t *testing.T) {
	t.Helper()
	testenv.StartManager(t, cfg, scheme, Setup)
}
