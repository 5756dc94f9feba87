package nodelabel

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// labelInputs is what of a Network or Subnet Desired reads, as one
// comparable string: a change elsewhere (a Subnet's used and available
// counts, a Network's statistics) cannot change any node's labels.
// Relabelling every node on each of those status writes, several per
// second during a pod storm, cost the manager most of a core at 1,000
// nodes (docs/benchmarks.md, At scale).
func labelInputs(o client.Object) string {
	switch v := o.(type) {
	case *estuaryv1.Network:
		sel := make([]string, 0, len(v.Spec.NodeSelector))
		for _, k := range slices.Sorted(maps.Keys(v.Spec.NodeSelector)) {
			sel = append(sel, k+"="+v.Spec.NodeSelector[k])
		}
		return fmt.Sprintf("deleting=%t type=%s selector=%s", v.DeletionTimestamp != nil, v.Spec.Type, strings.Join(sel, ","))
	case *estuaryv1.Subnet:
		return fmt.Sprintf("deleting=%t private=%t network=%s family=%s free=%t", v.DeletionTimestamp != nil,
			v.Spec.Private, v.Spec.Network, netmodel.SubnetFamily(&v.Spec), hasFree(v.Status.Available))
	}
	// Any other kind: always worth a look.
	return fmt.Sprintf("%T %s", o, o.GetResourceVersion())
}

// inputsChanged lets an update through only when labelInputs differ;
// creates and deletes always pass.
var inputsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return labelInputs(e.ObjectOld) != labelInputs(e.ObjectNew)
	},
}
