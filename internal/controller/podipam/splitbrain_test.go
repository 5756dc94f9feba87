package podipam

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestTwoManagersNeverRecordAnAddressTwice runs two managers at once, each
// with its own allocator that knows nothing of the other's choices (a split
// brain: two leaders), against one API server. Each serves the pods of one
// namespace from the same small subnet, so both pick the same addresses, in
// the same order, for different pods. The API server's uniqueness of
// IPInstance names must keep every address recorded at most once, every
// pod must still get one, and what each pod's node set up (the daemon's
// own wait, package ipwait) must be what its record says, in one pod only.
func TestTwoManagersNeverRecordAnAddressTwice(t *testing.T) {
	overlay(t, "ov-split", "10.62.0.0/26")
	nsA, nsB := newNamespace(t, nil), newNamespace(t, nil)
	startManager(t, nsA)
	startManager(t, nsB)
	nodes := startNodes(t, "node-a")
	nodes.addAll(t, 30, 30*time.Second, func(i int) *corev1.Pod {
		return newPod(t, []string{nsA, nsB}[i%2], fmt.Sprintf("p%d", i/2))
	})
	eventually(t, "every pod of both namespaces recorded", func() error {
		for i := range 15 {
			for _, ns := range []string{nsA, nsB} {
				if len(instancesOf(t, ns, fmt.Sprintf("p%d", i))) == 0 {
					return fmt.Errorf("%s/p%d has no address", ns, i)
				}
			}
		}
		return nil
	})
	all := append(allInstances(t, nsA), allInstances(t, nsB)...)
	requireUnique(t, all)
	nodes.check(t, nsA)
	nodes.check(t, nsB)
	for _, ipi := range all {
		if want := estuaryv1.InstanceName(addrOf(t, ipi)); ipi.Name != want {
			t.Errorf("record %s of %s/%s is not named after its address %s", ipi.Name, ipi.Spec.Binding.Namespace, ipi.Spec.Binding.PodName, want)
		}
	}
}
