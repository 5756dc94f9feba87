package podipam

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/estuary-cni/estuary/internal/netmodel"
)

// templateKeeps reports whether a stateful workload whose pod template has
// metadata m keeps its pods' addresses for the same ordinal: the
// template's ip-retain (or an alias), else the cluster's default
// (netmodel.Defaults.NoStatefulRetain, the manager's --default-ip-retain).
func (r *Reconciler) templateKeeps(m metav1.ObjectMeta) bool {
	if retain := netmodel.TemplateRetain(m); retain != nil {
		return *retain
	}
	return !r.Defaults.NoStatefulRetain
}
