package netmodel

// Where a selection key may be written. Each key of a pod's selection and
// fixed addresses is read from its estuary annotation and, for some keys,
// from other places with the same meaning:
//
//   - estuary's own label of the same name, for the network, subnet and
//     network type (a label value holds one name, so one subnet);
//   - hybridnet's annotation and label (networking.alibaba.com/*), in
//     hybridnet's syntax, translated to estuary's here, so that manifests
//     written for hybridnet run unchanged.
//
// On one object the estuary annotation comes first, then estuary's label,
// then hybridnet's annotation, then hybridnet's label; the first one set
// gives the value, and every other one set must mean the same, or the pod
// is refused naming both. A denial names the key that was written: the
// hybridnet label, say, when that is where the value came from. The pod's
// keys, in any form, win over its namespace's, key by key, as for the
// estuary annotations alone.
//
// hybridnet reads its keys more loosely than estuary: an ip-family or
// ip-retain value it does not know falls back to its default there, and is
// refused here, naming the key. A label or a hybridnet key set to "" is not
// set (hybridnet reads an empty value as unset); an estuary annotation set
// to "" is set, to the default.
//
// networking.alibaba.com/ip is not read: hybridnet's manager wrote the
// address it had allocated there, it never asked for one.

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// hybridnet's pod and namespace keys, read as aliases of estuary's.
const (
	// HybridnetNetwork is the annotation (or label) naming the network,
	// alias of networking.estuary.io/network.
	HybridnetNetwork = "networking.alibaba.com/specified-network"
	// HybridnetSubnet names the subnets as "name" or "v4name/v6name"
	// (annotation or label), alias of networking.estuary.io/subnet.
	HybridnetSubnet = "networking.alibaba.com/specified-subnet"
	// HybridnetNetworkType is Underlay, Overlay or GlobalBGP in any case
	// (annotation or label), alias of networking.estuary.io/network-type.
	HybridnetNetworkType = "networking.alibaba.com/network-type"
	// HybridnetIPFamily is IPv4Only, IPv6Only, DualStack, IPv4 or IPv6 in
	// any case, alias of networking.estuary.io/ip-family.
	HybridnetIPFamily = "networking.alibaba.com/ip-family"
	// HybridnetIPRetain is a strconv.ParseBool value, alias of
	// networking.estuary.io/ip-retain.
	HybridnetIPRetain = "networking.alibaba.com/ip-retain"
	// HybridnetIPPool is a comma-separated list of entries, each one
	// address or "v4/v6", alias of networking.estuary.io/ip-pool (the same
	// syntax).
	HybridnetIPPool = "networking.alibaba.com/ip-pool"
	// HybridnetMACPool is a comma-separated list of MAC addresses, alias of
	// networking.estuary.io/mac-pool (the same syntax).
	HybridnetMACPool = "networking.alibaba.com/mac-pool"
)

// source is one place a key's value may be written.
type source struct {
	key string
	// label: metadata.labels, not metadata.annotations.
	label bool
	// translate turns the value written into estuary's syntax; nil keeps
	// it as written.
	translate func(string) (string, error)
}

// field is the source's path in the object, e.g. metadata.labels[k].
func (s source) field() string {
	if s.label {
		return "metadata.labels[" + s.key + "]"
	}
	return "metadata.annotations[" + s.key + "]"
}

// read returns the value m has at s: an estuary annotation is set when
// present, any other source when not empty.
func (s source) read(m *metav1.ObjectMeta, estuaryKey string) (string, bool) {
	if s.label {
		v := m.Labels[s.key]
		return v, v != ""
	}
	v, ok := m.Annotations[s.key]
	if s.key != estuaryKey {
		ok = v != ""
	}
	return v, ok
}

// aliases lists, per estuary annotation, the other sources of its value in
// the order they are read after it.
var aliases = map[string][]source{
	estuaryv1.AnnotationNetwork: {
		{key: estuaryv1.AnnotationNetwork, label: true},
		{key: HybridnetNetwork},
		{key: HybridnetNetwork, label: true},
	},
	estuaryv1.AnnotationSubnet: {
		{key: estuaryv1.AnnotationSubnet, label: true},
		{key: HybridnetSubnet, translate: hybridnetSubnets},
		{key: HybridnetSubnet, label: true, translate: hybridnetSubnets},
	},
	estuaryv1.AnnotationNetworkType: {
		{key: estuaryv1.AnnotationNetworkType, label: true},
		{key: HybridnetNetworkType, translate: hybridnetNetworkType},
		{key: HybridnetNetworkType, label: true, translate: hybridnetNetworkType},
	},
	estuaryv1.AnnotationIPFamily: {{key: HybridnetIPFamily, translate: hybridnetIPFamily}},
	estuaryv1.AnnotationIPRetain: {{key: HybridnetIPRetain, translate: hybridnetBool}},
	estuaryv1.AnnotationIPPool:   {{key: HybridnetIPPool}},
	estuaryv1.AnnotationMACPool:  {{key: HybridnetMACPool}},
}

// sourcesOf lists where key may be written, in precedence order.
func sourcesOf(key string) []source {
	return append([]source{{key: key}}, aliases[key]...)
}

// Translate turns value, written at hybridnet's key (HybridnetNetwork,
// ...), into the value of the estuary annotation it is an alias of, in
// estuary's syntax. It returns that annotation's key and ok false for a key
// that is not an alias.
func Translate(hybridnetKey, value string) (estuaryKey, translated string, ok bool, err error) {
	for key, srcs := range aliases {
		for _, s := range srcs {
			if s.key != hybridnetKey || s.label || !strings.HasPrefix(s.key, "networking.alibaba.com/") {
				continue
			}
			if s.translate == nil {
				return key, value, true, nil
			}
			translated, err = s.translate(value)
			return key, translated, true, err
		}
	}
	return "", "", false, nil
}

// hybridnetSubnets reads "name" or "v4name/v6name" as estuary's list.
func hybridnetSubnets(v string) (string, error) {
	names := strings.Split(v, "/")
	if len(names) > 2 {
		return "", fmt.Errorf("%q names %d subnets; hybridnet's syntax names one, or an IPv4 and an IPv6 one as v4name/v6name", v, len(names))
	}
	for i, name := range names {
		if !validName(name) {
			return "", fmt.Errorf("%q: %q is not a valid subnet name", v, name)
		}
		if i == 1 && name == names[0] {
			return "", fmt.Errorf("%q names subnet %q twice", v, name)
		}
	}
	return strings.Join(names, ","), nil
}

// hybridnetNetworkType reads a network type in any case.
func hybridnetNetworkType(v string) (string, error) {
	for _, t := range []string{string(estuaryv1.NetworkTypeOverlay), string(estuaryv1.NetworkTypeUnderlay), "GlobalBGP"} {
		if strings.EqualFold(v, t) {
			return t, nil
		}
	}
	return "", fmt.Errorf("%q is not Overlay, Underlay or GlobalBGP (in any case)", v)
}

// hybridnetIPFamily reads hybridnet's family names in any case.
func hybridnetIPFamily(v string) (string, error) {
	switch strings.ToLower(v) {
	case "ipv4only", "ipv4":
		return estuaryv1.IPFamilyIPv4, nil
	case "ipv6only", "ipv6":
		return estuaryv1.IPFamilyIPv6, nil
	case "dualstack":
		return estuaryv1.IPFamilyDualStack, nil
	}
	return "", fmt.Errorf("%q is not IPv4Only, IPv6Only, DualStack, IPv4 or IPv6 (in any case)", v)
}

// hybridnetBool reads a strconv.ParseBool value as "true" or "false".
func hybridnetBool(v string) (string, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return "", fmt.Errorf("%q is not a boolean (true, false, 1, 0, t, f in any of Go's spellings)", v)
	}
	return strconv.FormatBool(b), nil
}

// sameMeaning compares two values of one key, spaces aside.
func sameMeaning(a, b string) bool {
	return strings.Join(strings.Fields(a), "") == strings.Join(strings.Fields(b), "")
}

// readOn reads key from one object's metadata (the pod's, or its
// namespace's when from names it): the value of the first source set,
// after checking that every other source set parses and means the same. It
// notes in s where the value came from.
func (s *Selection) readOn(m *metav1.ObjectMeta, key, from string) (string, bool, error) {
	var first source
	var value, raw string
	found := false
	for _, src := range sourcesOf(key) {
		written, ok := src.read(m, key)
		if !ok {
			continue
		}
		v := written
		if src.translate != nil {
			var err error
			if v, err = src.translate(written); err != nil {
				s.note(key, from, src)
				return "", true, s.deny(key, "%s", err)
			}
		}
		if !found {
			first, value, raw, found = src, v, written, true
			continue
		}
		if !sameMeaning(value, v) {
			s.note(key, from, first)
			return "", true, s.deny(key, "is %q, but %s on the same object is %q; set one of them, or both to the same value",
				raw, src.field(), written)
		}
	}
	if found {
		s.note(key, from, first)
	}
	return value, found, nil
}

// note records where key's value was read: on the pod (from "") or its
// namespace, at src.
func (s *Selection) note(key, from string, src source) {
	if s.From == nil {
		s.From = map[string]string{}
	}
	s.From[key] = from
	if src.key == key && !src.label {
		delete(s.via, key)
		return
	}
	if s.via == nil {
		s.via = map[string]source{}
	}
	s.via[key] = src
}

// TemplateRetain reads the ip-retain annotation, or one of its aliases,
// from a pod template's metadata: nil when it is not set or does not parse
// (the template's pods are refused then).
func TemplateRetain(m metav1.ObjectMeta) *bool {
	var sel Selection
	v, ok, err := sel.readOn(&m, estuaryv1.AnnotationIPRetain, "")
	if err != nil || !ok || (v != "true" && v != "false") {
		return nil
	}
	b := v == "true"
	return &b
}
