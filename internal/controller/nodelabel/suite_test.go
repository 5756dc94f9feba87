package nodelabel

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
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

// startManager runs the node label controller until the test ends.
func startManager(t *testing.T) {
	t.Helper()
	testenv.StartManager(t, cfg, scheme, Setup)
}

func bg() context.Context { return context.Background() }

// eventually retries check until it succeeds or 30 seconds pass.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, what, 30*time.Second, check)
}

func newNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := k8s.Create(bg(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), n) })
}

func newNetwork(t *testing.T, name string, spec estuaryv1.NetworkSpec) {
	t.Helper()
	if spec.NetID == nil {
		spec.NetID = ptr.To[int64](7)
	}
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := k8s.Create(bg(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), n) })
}

func newSubnet(t *testing.T, name, network, cidr string, version int32) {
	t.Helper()
	sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.SubnetSpec{Network: network, Range: estuaryv1.AddressRange{Version: version, CIDR: cidr}}}
	if err := k8s.Create(bg(), sn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), sn) })
}

// setAvailable writes a subnet's status.available, as the status writer does.
func setAvailable(t *testing.T, name, available string) {
	t.Helper()
	sn := &estuaryv1.Subnet{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, sn); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(sn.DeepCopy())
	sn.Status.Available = available
	if err := k8s.Status().Patch(bg(), sn, patch); err != nil {
		t.Fatal(err)
	}
}

func nodeLabels(name string) (map[string]string, string, error) {
	n := &corev1.Node{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, n); err != nil {
		return nil, "", err
	}
	return n.Labels, n.ResourceVersion, nil
}

// waitLabels waits until the node's labels hold every key of want with its
// value, and none of absent.
func waitLabels(t *testing.T, node string, want map[string]string, absent ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("labels of node %s", node), func() error {
		have, _, err := nodeLabels(node)
		if err != nil {
			return err
		}
		for k, v := range want {
			if have[k] != v {
				return fmt.Errorf("%s=%q, want %q (labels %v)", k, have[k], v, have)
			}
		}
		for _, k := range absent {
			if _, ok := have[k]; ok {
				return fmt.Errorf("%s still set (labels %v)", k, have)
			}
		}
		return nil
	})
}
