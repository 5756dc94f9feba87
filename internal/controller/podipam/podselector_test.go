package podipam

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// With --pod-label-selector, a pod it does not select gets no address and
// a NotSelected event naming the selector, while a selected pod of the same
// namespace and network gets its address as usual; a StatefulSet-like name
// holding nothing stays empty. A pod selected by the same selector written
// with set syntax is served too.
func TestPodLabelSelectorServesOnlySelectedPods(t *testing.T) {
	ns := newNamespace(t, nil)
	newNetwork(t, "ov-podsel", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](11)},
		map[string]estuaryv1.SubnetSpec{"ov-podsel-v4": {Network: "ov-podsel", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.72.0.0/24"}}})
	sel, err := labels.Parse("cni in (estuary),tier!=legacy")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := startManagerWith(t, testManagerFor(sel))
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	net := annotated(estuaryv1.AnnotationNetwork, "ov-podsel")
	outs := []string{
		newPod(t, ns, "unlabelled", net).Name,
		newPod(t, ns, "other-cni", net, labelledPod("cni", "calico")).Name,
		newPod(t, ns, "legacy", net, labelledPod("cni", "estuary"), labelledPod("tier", "legacy")).Name,
	}
	in := newPod(t, ns, "selected", net, labelledPod("cni", "estuary"))
	waitInstances(t, ns, in.Name, 1, estuaryv1.IPInstanceBound)
	for _, out := range outs {
		eventually(t, "NotSelected event for "+out, func() error {
			return eventNote(ns, out, ReasonNotSelected, fmt.Sprintf("--pod-label-selector %q", sel.String()))
		})
		if got := instancesOf(t, ns, out); len(got) != 0 {
			t.Errorf("pod %s outside the selector holds %d IPInstances, want none", out, len(got))
		}
	}
	waitUsed(t, "ov-podsel-v4", 1)
}

func testManagerFor(sel labels.Selector) testManager {
	return testManager{rc: cfg, pods: sel}
}
