package workload

// Configured controller kinds (the manager's --workload-kinds, the chart's
// manager.workloadKinds): a pod whose controller is of one of them has that
// controller for its workload, as a pod of a Deployment has the
// Deployment. Such an owner is verified like the others, from its metadata
// only (metav1.PartialObjectMetadata with the kind's group, version and
// kind), read live: estuary needs neither the controller's Go types nor a
// watch of its objects, only get on its resource. A configured kind is
// known by Kind.group (CloneSet.apps.kruise.io), so it never shares a key
// with a built-in kind of the same name. A kind configured with ordinal
// names its pods <owner>-<ordinal> and has each pod's addresses kept for
// the pod of the same name, as a StatefulSet's are, while the owner
// exists; any other kind keeps them for its next pod, as a Deployment
// does.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Kind is a controller kind configured as a workload.
type Kind struct {
	// Group is the kind's API group.
	Group string `json:"group"`
	// Version is the API version its objects are read at.
	Version string `json:"version"`
	// Kind is the kind, as owner references name it.
	Kind string `json:"kind"`
	// Resource is the kind's resource, which the chart grants get on (the
	// manager maps the kind with the API server's RESTMapper); empty: the
	// kind in lower case with an s.
	Resource string `json:"resource,omitempty"`
	// Ordinal: the kind names its pods <owner>-<ordinal>, and each pod's
	// addresses are kept for the pod of the same name.
	Ordinal bool `json:"ordinal,omitempty"`
}

// GVK is the group, version and kind its objects are read at.
func (k Kind) GVK() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// RefKind is the Kind a workload of k is known by: Kind.group.
func (k Kind) RefKind() string { return k.Kind + "." + k.Group }

// configured holds the kinds Configure set, read by Of and the retention
// rules on every pod.
var configured atomic.Pointer[[]Kind]

// Configure sets the configured kinds for the whole process; the manager
// calls it once, before its controllers and webhook start.
func Configure(kinds []Kind) {
	kinds = slices.Clone(kinds)
	configured.Store(&kinds)
}

// Configured are the kinds Configure set.
func Configured() []Kind {
	if p := configured.Load(); p != nil {
		return *p
	}
	return nil
}

// configuredKind is the configured kind of group and kind gk.
func configuredKind(gk schema.GroupKind) (Kind, bool) {
	all := Configured()
	i := slices.IndexFunc(all, func(k Kind) bool { return k.GVK().GroupKind() == gk })
	if i < 0 {
		return Kind{}, false
	}
	return all[i], true
}

// ConfiguredByRefKind is the configured kind a workload's Kind (RefKind)
// names.
func ConfiguredByRefKind(refKind string) (Kind, bool) {
	all := Configured()
	i := slices.IndexFunc(all, func(k Kind) bool { return k.RefKind() == refKind })
	if i < 0 {
		return Kind{}, false
	}
	return all[i], true
}

// isOrdinalKind: refKind is a configured kind with ordinal names.
func isOrdinalKind(refKind string) bool {
	k, ok := ConfiguredByRefKind(refKind)
	return ok && k.Ordinal
}

// ConfiguredController is the configured kind of pod's controller, if it
// is one.
func ConfiguredController(pod *corev1.Pod) (Kind, *metav1.OwnerReference, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Kind{}, nil, false
	}
	k, ok := configuredKind(kindOf(ref))
	return k, ref, ok
}

// ParseKinds parses the manager's --workload-kinds: a JSON list of
// {group, version, kind, resource, ordinal}. An error names the entry at
// fault, and nothing is configured.
func ParseKinds(s string) ([]Kind, error) {
	if s == "" {
		return nil, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("want a JSON list of {group, version, kind, ordinal}: %w", err)
	}
	var kinds []Kind
	for i, r := range raw {
		var k Kind
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		err := dec.Decode(&k)
		if err == nil {
			err = k.validate(kinds)
		}
		if err != nil {
			return nil, fmt.Errorf("entry %d (%s): %w", i, r, err)
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

// validate checks k, and that none of before is its kind.
func (k Kind) validate(before []Kind) error {
	var errs []error
	if k.Group == "" {
		errs = append(errs, errors.New("group: required (of the core group's controllers, estuary follows ReplicationController already)"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(k.Group) {
			errs = append(errs, fmt.Errorf("group %q: %s", k.Group, msg))
		}
	}
	if k.Version == "" {
		errs = append(errs, errors.New("version: required"))
	} else if _, err := schema.ParseGroupVersion(k.Version); err != nil || len(validation.IsDNS1035Label(k.Version)) > 0 {
		errs = append(errs, fmt.Errorf("version %q: not an API version such as v1 or v1alpha1", k.Version))
	}
	if k.Kind == "" || k.Kind[0] < 'A' || k.Kind[0] > 'Z' || len(validation.IsDNS1035Label(strings.ToLower(k.Kind))) > 0 {
		errs = append(errs, fmt.Errorf("kind %q: want a kind such as CloneSet (a capital letter, then letters and digits)", k.Kind))
	}
	if k.Resource != "" && len(validation.IsDNS1123Label(k.Resource)) > 0 {
		errs = append(errs, fmt.Errorf("resource %q: want a resource such as clonesets", k.Resource))
	}
	gk := k.GVK().GroupKind()
	switch {
	case gk == schema.GroupKind{Kind: KindPod}:
		errs = append(errs, errors.New("kind: a Pod is not a controller"))
	case slices.ContainsFunc(slices.Concat(Owners, Optional), func(g schema.GroupVersionKind) bool { return g.GroupKind() == gk }):
		errs = append(errs, fmt.Errorf("kind %s: estuary follows it already", k.RefKind()))
	case slices.ContainsFunc(before, func(b Kind) bool { return b.GVK().GroupKind() == gk }):
		errs = append(errs, fmt.Errorf("kind %s: listed twice", k.RefKind()))
	}
	return errors.Join(errs...)
}
