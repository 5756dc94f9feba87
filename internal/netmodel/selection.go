package netmodel

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Selection is what a pod asks for through its annotations, each key taken
// from the pod or, when the pod does not set it, from its namespace. It
// follows the same inheritance as the manager's allocator. Empty fields mean
// the default.
type Selection struct {
	// Pod is the pod's namespace/name (namespace/generateName before the
	// API server has named it), for messages.
	Pod string
	// Namespace is the pod's namespace.
	Namespace string
	// Network is the named Network.
	Network string
	// Subnets are the named Subnets in the order written, at most
	// MaxSubnets: for each family the allocator tries that family's
	// subnets in this order and takes the first with a free address.
	Subnets []string
	// NetworkType is the requested type of the pod's network.
	NetworkType estuaryv1.NetworkType
	// IPFamily is IPv4, IPv6 or DualStack.
	IPFamily string
	// From says, per annotation key set (in any of its forms, see
	// aliases.go), whether the value came from the pod ("") or from its
	// namespace (the namespace's name).
	From map[string]string
	// NamespaceLabels are the labels of the pod's namespace, which the
	// namespace selectors of Networks and Subnets match: at least
	// kubernetes.io/metadata.name, which the API server sets to the
	// namespace's name, also when the namespace was not found.
	NamespaceLabels labels.Set

	// via says, per annotation key whose value was read from another
	// source than the estuary annotation (a label, a hybridnet key), that
	// source, so that denials name what was written.
	via map[string]source
	// defaults are the cluster's (Defaults.Apply).
	defaults Defaults
	// boundTo is the node whose Underlay network Network is, for a pod
	// that asked by type (Bind).
	boundTo string
}

// Families lists, IPv4 first, the families the ip-family annotation asks
// for; nil when it is unset (the network's families, see FamiliesNeeded).
func (s *Selection) Families() []family.Family {
	switch s.IPFamily {
	case estuaryv1.IPFamilyIPv4:
		return []family.Family{family.IPv4}
	case estuaryv1.IPFamilyIPv6:
		return []family.Family{family.IPv6}
	case estuaryv1.IPFamilyDualStack:
		return []family.Family{family.IPv4, family.IPv6}
	}
	return nil
}

// Empty reports whether the pod asks for nothing at all.
func (s *Selection) Empty() bool { return len(s.From) == 0 }

// field is the path of the key as written (the annotation, or the label or
// hybridnet key it was read from), noting when it was inherited.
func (s *Selection) field(key string) string {
	f := "metadata.annotations[" + key + "]"
	if key == estuaryv1.AnnotationNetwork && s.boundTo != "" {
		return "spec.nodeName (" + s.Network + " is the Underlay network of node " + `"` + s.boundTo + `")`
	}
	if src, ok := s.via[key]; ok {
		f = src.field()
	}
	if ns := s.From[key]; ns != "" {
		f += " (inherited from namespace " + `"` + ns + `")`
	}
	return f
}

func (s *Selection) deny(key, format string, args ...any) *Denial {
	return Deny(KindPod, s.Pod, s.field(key), format, args...)
}

// SelectionFor reads the pod's network annotations (or their label and
// hybridnet forms, see aliases.go), each falling back to ns's (ns may be
// nil), and checks that every value parses: object names for the network
// and subnets (at most MaxSubnets, none twice), a NetworkType, an IP family.
func SelectionFor(pod *corev1.Pod, ns *corev1.Namespace) (Selection, error) {
	sel := Selection{Pod: podName(pod), Namespace: pod.Namespace, From: map[string]string{}, NamespaceLabels: namespaceLabels(pod.Namespace, ns)}
	var err error
	get := func(key string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = sel.lookup(pod, ns, key)
		return v
	}
	network, subnets, netType, fam := get(estuaryv1.AnnotationNetwork), get(estuaryv1.AnnotationSubnet),
		get(estuaryv1.AnnotationNetworkType), get(estuaryv1.AnnotationIPFamily)
	if err != nil {
		return sel, err
	}
	return sel, sel.parse(network, subnets, netType, fam)
}

// parse checks and keeps the values of the selection's keys.
func (s *Selection) parse(network, subnets, netType, fam string) error {
	if v := network; v != "" {
		if !validName(v) {
			return s.deny(estuaryv1.AnnotationNetwork, "%q is not a valid network name", v)
		}
		s.Network = v
	}
	if v := subnets; v != "" {
		names, err := parseSubnets(s, v)
		if err != nil {
			return err
		}
		s.Subnets = names
	}
	if v := netType; v != "" {
		t := estuaryv1.NetworkType(v)
		if t != estuaryv1.NetworkTypeOverlay && t != estuaryv1.NetworkTypeUnderlay && t != estuaryv1.NetworkTypeGlobalBGP {
			return s.deny(estuaryv1.AnnotationNetworkType, "%q is not %s, %s or %s", v,
				estuaryv1.NetworkTypeOverlay, estuaryv1.NetworkTypeUnderlay, estuaryv1.NetworkTypeGlobalBGP)
		}
		s.NetworkType = t
	}
	if v := fam; v != "" {
		switch v {
		case estuaryv1.IPFamilyIPv4, estuaryv1.IPFamilyIPv6, estuaryv1.IPFamilyDualStack:
			s.IPFamily = v
		default:
			return s.deny(estuaryv1.AnnotationIPFamily, "%q is not one of %s, %s, %s", v,
				estuaryv1.IPFamilyIPv4, estuaryv1.IPFamilyIPv6, estuaryv1.IPFamilyDualStack)
		}
	}
	return nil
}

// namespaceLabels are ns's labels (ns may be nil), with
// kubernetes.io/metadata.name set to name.
func namespaceLabels(name string, ns *corev1.Namespace) labels.Set {
	out := labels.Set{corev1.LabelMetadataName: name}
	if ns != nil {
		for k, v := range ns.Labels {
			if k != corev1.LabelMetadataName {
				out[k] = v
			}
		}
	}
	return out
}

// MaxSubnets is how many subnets the subnet annotation may name.
const MaxSubnets = 16

// lookup reads annotation key (or one of its other forms, see aliases.go)
// from pod or, when the pod does not set it in any form, from ns (nil: the
// pod only), noting in From where it came from. It refuses a value written
// in two forms on one object with two meanings, and a hybridnet value that
// does not parse.
func (s *Selection) lookup(pod *corev1.Pod, ns *corev1.Namespace, key string) (string, error) {
	if v, ok, err := s.readOn(&pod.ObjectMeta, key, ""); ok || err != nil {
		return v, err
	}
	if ns != nil {
		if v, ok, err := s.readOn(&ns.ObjectMeta, key, ns.Name); ok || err != nil {
			return v, err
		}
	}
	return "", nil
}

// parseSubnets splits the subnet annotation's comma-separated list, keeping
// its order.
func parseSubnets(sel *Selection, v string) ([]string, error) {
	list := strings.Split(v, ",")
	if len(list) > MaxSubnets {
		return nil, sel.deny(estuaryv1.AnnotationSubnet, "names %d subnets; name at most %d", len(list), MaxSubnets)
	}
	names := make([]string, 0, len(list))
	for _, name := range list {
		name = strings.TrimSpace(name)
		if !validName(name) {
			return nil, sel.deny(estuaryv1.AnnotationSubnet, "%q: %q is not a valid subnet name", v, name)
		}
		for _, seen := range names {
			if seen == name {
				return nil, sel.deny(estuaryv1.AnnotationSubnet, "%q names subnet %q twice", v, name)
			}
		}
		names = append(names, name)
	}
	return names, nil
}

func podName(pod *corev1.Pod) string {
	if pod.Name == "" && pod.GenerateName != "" {
		return pod.Namespace + "/" + pod.GenerateName
	}
	return pod.Namespace + "/" + pod.Name
}

// validName accepts a Kubernetes object name (DNS-1123 subdomain).
func validName(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }
