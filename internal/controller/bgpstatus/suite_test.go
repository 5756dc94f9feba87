package bgpstatus

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	cfg    *rest.Config
	k8s    client.Client
	scheme *runtime.Scheme
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(c *rest.Config, cl client.Client) (func(), error) {
		cfg, k8s, scheme = c, cl, cl.Scheme()
		return nil, nil
	}))
}

// startManager runs the controller until the test ends.
func startManager(t *testing.T) {
	t.Helper()
	testenv.StartManager(t, cfg, scheme, Setup)
}
