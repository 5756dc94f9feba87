package webhook

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// checkSelector refuses a namespace selector of object kind/name at field
// that does not parse (an unknown operator, values where none belong):
// netmodel takes such a selector as selecting no namespace, which would
// silently lock every namespace out.
func checkSelector(kind, name, field string, s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return netmodel.Deny(kind, name, field, "is not a valid label selector: %v", err)
	}
	return nil
}

// checkSubnetSelectors applies checkSelector to a subnet's namespace
// selectors.
func checkSubnetSelectors(s *estuaryv1.Subnet) []error {
	return []error{
		checkSelector(netmodel.KindSubnet, s.Name, "spec.namespaceSelector", s.Spec.NamespaceSelector),
		checkSelector(netmodel.KindSubnet, s.Name, "spec.reservedNamespaceSelector", s.Spec.ReservedNamespaceSelector),
	}
}

// checkNetworkSelectors applies checkSelector to a network's namespace
// selectors.
func checkNetworkSelectors(n *estuaryv1.Network) error {
	if n.Spec.Retention == nil {
		return nil
	}
	return checkSelector(netmodel.KindNetwork, n.Name, "spec.retention.neverNamespaceSelector", n.Spec.Retention.NeverNamespaceSelector)
}
