package migrate

// hybridnet's networking.alibaba.com/v1 objects, as far as they are
// migrated. The types are this package's own, with hybridnet's field names
// and JSON shapes: hybridnet is not a dependency. Every field of an input
// object's spec that these types do not know is found by walking the input
// against a shape of the known fields, and reported, so that nothing a
// later hybridnet added is dropped unseen.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is hybridnet's API group; its objects are of version v1.
const Group = "networking.alibaba.com"

// GroupVersion is hybridnet's API version.
var GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// Resources of hybridnet's kinds that are migrated.
var (
	NetworksResource    = GroupVersion.WithResource("networks")
	SubnetsResource     = GroupVersion.WithResource("subnets")
	IPInstancesResource = GroupVersion.WithResource("ipinstances")
)

// hnNetwork is a hybridnet Network's spec.
type hnNetwork struct {
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	NetID        *int32            `json:"netID,omitempty"`
	Type         string            `json:"type,omitempty"`
	Mode         string            `json:"mode,omitempty"`
	Config       *struct {
		BGPPeers []hnBGPPeer `json:"bgpPeers,omitempty"`
	} `json:"config,omitempty"`
}

type hnBGPPeer struct {
	ASN                    int32  `json:"asn"`
	Address                string `json:"address"`
	GracefulRestartSeconds int32  `json:"gracefulRestartSeconds,omitempty"`
	Password               string `json:"password,omitempty"`
	DoesNotRouteTraffic    bool   `json:"doesNotRouteTraffic,omitempty"`
	AllowNotEstablished    bool   `json:"allowNotEstablished,omitempty"`
}

// hnSubnet is a hybridnet Subnet's spec.
type hnSubnet struct {
	Range struct {
		Version     string   `json:"version"`
		Start       string   `json:"start,omitempty"`
		End         string   `json:"end,omitempty"`
		CIDR        string   `json:"cidr"`
		Gateway     string   `json:"gateway,omitempty"`
		ReservedIPs []string `json:"reservedIPs,omitempty"`
		ExcludeIPs  []string `json:"excludeIPs,omitempty"`
	} `json:"range"`
	NetID   *int32 `json:"netID,omitempty"`
	Network string `json:"network"`
	Config  *struct {
		GatewayType     string   `json:"gatewayType,omitempty"`
		GatewayNode     string   `json:"gatewayNode,omitempty"`
		AutoNatOutgoing *bool    `json:"autoNatOutgoing,omitempty"`
		Private         *bool    `json:"private,omitempty"`
		AllowSubnets    []string `json:"allowSubnets,omitempty"`
	} `json:"config,omitempty"`
}

// hnIPInstance is a hybridnet IPInstance's spec and the status fields older
// hybridnet releases kept the binding in.
type hnIPInstance struct {
	Spec struct {
		Network string `json:"network"`
		Subnet  string `json:"subnet"`
		Address struct {
			Version string `json:"version"`
			IP      string `json:"ip"`
			Gateway string `json:"gateway,omitempty"`
			NetID   *int32 `json:"netID,omitempty"`
			MAC     string `json:"mac,omitempty"`
		} `json:"address"`
		Binding struct {
			ReferredObject struct {
				Kind string `json:"kind,omitempty"`
				Name string `json:"name,omitempty"`
				UID  string `json:"uid,omitempty"`
			} `json:"referredObject,omitempty"`
			NodeName string `json:"nodeName,omitempty"`
			PodUID   string `json:"podUID,omitempty"`
			PodName  string `json:"podName,omitempty"`
			Stateful *struct {
				Index *int32 `json:"index,omitempty"`
			} `json:"stateful,omitempty"`
		} `json:"binding,omitempty"`
	} `json:"spec"`
	Status struct {
		NodeName string `json:"nodeName,omitempty"`
		PodName  string `json:"podName,omitempty"`
		Phase    string `json:"phase,omitempty"`
	} `json:"status,omitempty"`
}

// shape is the set of known fields of an object: a field maps to nil (a
// value), a shape (an object), []shape (a list of such objects) or
// anyKeys (a map whose keys are data, e.g. a label selector).
type shape map[string]any

// anyKeys marks a map field whose keys are data.
type anyKeys struct{}

var networkShape = shape{
	"nodeSelector": anyKeys{}, "netID": nil, "type": nil, "mode": nil,
	"config": shape{"bgpPeers": []shape{{"asn": nil, "address": nil, "gracefulRestartSeconds": nil, "password": nil,
		"doesNotRouteTraffic": nil, "allowNotEstablished": nil}}},
}

var subnetShape = shape{
	"range": shape{"version": nil, "start": nil, "end": nil, "cidr": nil, "gateway": nil, "reservedIPs": nil, "excludeIPs": nil},
	"netID": nil, "network": nil,
	"config": shape{"gatewayType": nil, "gatewayNode": nil, "autoNatOutgoing": nil, "private": nil, "allowSubnets": nil},
}

var ipInstanceShape = shape{
	"network": nil, "subnet": nil,
	"address": shape{"version": nil, "ip": nil, "gateway": nil, "netID": nil, "mac": nil},
	"binding": shape{"referredObject": shape{"kind": nil, "name": nil, "uid": nil}, "nodeName": nil, "podUID": nil,
		"podName": nil, "stateful": shape{"index": nil}},
}

// unknownFields lists, sorted, the paths (under prefix) of v's fields that
// sh does not know.
func unknownFields(v any, sh any, prefix string) []string {
	var out []string
	switch sh := sh.(type) {
	case shape:
		m, ok := v.(map[string]any)
		if !ok {
			return nil // a type mismatch fails the decode instead
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			sub, known := sh[k]
			if !known {
				out = append(out, prefix+"."+k)
				continue
			}
			out = append(out, unknownFields(m[k], sub, prefix+"."+k)...)
		}
	case []shape:
		items, _ := v.([]any)
		for i, item := range items {
			out = append(out, unknownFields(item, sh[0], fmt.Sprintf("%s[%d]", prefix, i))...)
		}
	}
	return out
}

// decodeSpec decodes u's spec into into, after listing the spec fields
// sh does not know.
func decodeSpec(u *unstructured.Unstructured, sh shape, into any) (unknown []string, err error) {
	spec, _ := u.Object["spec"].(map[string]any)
	unknown = unknownFields(spec, sh, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, into); err != nil {
		return unknown, fmt.Errorf("spec: %w", err)
	}
	return unknown, nil
}

// decodeIPInstance decodes u's spec and status.
func decodeIPInstance(u *unstructured.Unstructured) (hnIPInstance, []string, error) {
	var ipi hnIPInstance
	spec, _ := u.Object["spec"].(map[string]any)
	unknown := unknownFields(spec, ipInstanceShape, "spec")
	obj := map[string]any{"spec": spec, "status": u.Object["status"]}
	if spec == nil {
		obj["spec"] = map[string]any{}
	}
	if obj["status"] == nil {
		obj["status"] = map[string]any{}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &ipi); err != nil {
		return ipi, unknown, fmt.Errorf("spec: %w", err)
	}
	return ipi, unknown, nil
}

// kindOf says which hybridnet kind u is, "" for any other object.
func kindOf(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	if gvk.Group != Group {
		return ""
	}
	return gvk.Kind
}

// objectName is "kind name" or "kind namespace/name", for reports.
func objectName(kind string, u *unstructured.Unstructured) string {
	k := strings.ToLower(kind)
	if u.GetNamespace() != "" {
		return k + " " + u.GetNamespace() + "/" + u.GetName()
	}
	return k + " " + u.GetName()
}
