package daemon

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
)

// adminNetworkPoliciesServed says whether the API server serves
// AdminNetworkPolicy and BaselineAdminNetworkPolicy at v1alpha1
// (network-policy-api v0.1.x; the chart installs neither CRD). Each
// served kind is enforced as the ClusterNetworkPolicy it converts to
// (policytranslate/policy_anp.go). As for ClusterNetworkPolicy, a CRD installed
// later is seen at the daemon's next start.
func adminNetworkPoliciesServed(m meta.RESTMapper) (anp, banp bool, err error) {
	if anp, err = servedV1alpha1(m, "AdminNetworkPolicy"); err != nil {
		return false, false, err
	}
	if banp, err = servedV1alpha1(m, "BaselineAdminNetworkPolicy"); err != nil {
		return false, false, err
	}
	return anp, banp, nil
}

func servedV1alpha1(m meta.RESTMapper, kind string) (bool, error) {
	gv := npv1alpha1.GroupVersion
	_, err := m.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, gv.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", kind, err)
	}
	return true, nil
}
