package manager

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/estuary-cni/estuary/internal/workload"
)

// checkWorkloadKinds logs each configured workload kind the API server
// does not serve: the manager runs on, and the pods of such a kind are
// their own workloads (each gets a podipam.ReasonOwnerUnverified Event)
// until the kind is served.
func checkWorkloadKinds(mapper meta.RESTMapper, kinds []workload.Kind) {
	for _, k := range kinds {
		m, err := mapper.RESTMapping(k.GVK().GroupKind(), k.Version)
		if err != nil {
			log.Error(err, "workload kind not served: its pods are their own workloads until it is", "kind", k.GVK().String())
			continue
		}
		log.Info("workload kind", "kind", k.GVK().String(), "resource", m.Resource.Resource, "ordinal", k.Ordinal)
	}
}
