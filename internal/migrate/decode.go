package migrate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ReadObjects decodes every object of a YAML or JSON stream: YAML
// documents separated by ---, concatenated JSON objects, and lists (kind
// List, or NetworkList and the like, as kubectl get -o yaml prints them),
// whose items are returned one by one. name names the stream in errors.
func ReadObjects(name string, r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		obj := map[string]any{}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if len(obj) == 0 {
			continue // an empty document
		}
		u := &unstructured.Unstructured{Object: obj}
		if !strings.HasSuffix(u.GetKind(), "List") {
			if u.GetKind() == "" || u.GetAPIVersion() == "" {
				return nil, fmt.Errorf("%s: document %d has no apiVersion or kind", name, doc)
			}
			out = append(out, u)
			continue
		}
		items, err := u.ToList()
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		for i := range items.Items {
			out = append(out, &items.Items[i])
		}
	}
}

// Sort files hybridnet's objects by kind; every other object is returned in
// rest.
func Sort(objs []*unstructured.Unstructured) (networks, subnets, ipInstances, rest []*unstructured.Unstructured) {
	for _, u := range objs {
		switch kindOf(u) {
		case "Network":
			networks = append(networks, u)
		case "Subnet":
			subnets = append(subnets, u)
		case "IPInstance":
			ipInstances = append(ipInstances, u)
		default:
			rest = append(rest, u)
		}
	}
	return networks, subnets, ipInstances, rest
}
