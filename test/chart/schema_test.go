package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestValuesSchemaAccepts: the defaults, the lab's values (lab.EstuaryValues)
// and every value set the other tests render pass values.schema.json.
func TestValuesSchemaAccepts(t *testing.T) {
	for name, objs := range renders(t) {
		if len(objs) == 0 {
			t.Errorf("%s: nothing rendered", name)
		}
	}
	for _, set := range [][]string{
		{"imageRegistry=registry.example:5000/estuary", "manager.image.tag=0.2.0", "daemon.image.tag=1"},
		{"daemon.kubeProxyMasqueradeBit=14", "daemon.mtu=1400", "daemon.addressTimeout=30s", "manager.maxRetainTTL=24h"},
		{"daemon.bindAddress=null", "manager.logLevel=5", "daemon.logLevel=debug", "daemon.rtTablesDir="},
		{"manager.tolerations[0].key=k", "manager.tolerations[0].operator=Equal", "manager.tolerations[0].value=v",
			"manager.tolerations[0].effect=NoSchedule", "imagePullSecrets[0].name=regcred"},
	} {
		if _, err := renderErr(t, "--set", strings.Join(set, ",")); err != nil {
			t.Errorf("--set %s: %v", strings.Join(set, ","), err)
		}
	}
}

// TestValuesSchemaRefuses: a misspelt key and a value of the wrong type or
// out of its range fail the render (as they fail helm install and upgrade),
// with a message naming the key.
func TestValuesSchemaRefuses(t *testing.T) {
	subnet := "defaultNetwork.subnets[0].name=a,defaultNetwork.subnets[0].cidr=10.0.0.0/8,"
	for _, c := range []struct{ set, want string }{
		{"managr.replicas=2", "at '': additional properties 'managr' not allowed"},
		{"daemon.cniVersio=1.0.0", "at '/daemon': additional properties 'cniVersio' not allowed"},
		{"manager.image.repo=x", "at '/manager/image': additional properties 'repo' not allowed"},
		{"daemon.image.digest=latest", "at '/daemon/image/digest'"},
		{subnet + "defaultNetwork.subnets[0].natOutgoin=false", "at '/defaultNetwork/subnets/0': additional properties 'natOutgoin' not allowed"},
		{"manager.resources.limit.cpu=1", "at '/manager/resources': additional properties 'limit' not allowed"},
		{"manager.replicas=two", "at '/manager/replicas': got string, want integer"},
		{"daemon.fastPath=maybe", "at '/daemon/fastPath': got string, want boolean"},
		{"daemon.cniVersion=0.4.0", "at '/daemon/cniVersion'"},
		{"imagePullPolicy=Sometimes", "at '/imagePullPolicy'"},
		{"defaultNetwork.netID=0", "at '/defaultNetwork/netID'"},
		{"webhook.port=70000", "at '/webhook/port'"},
		{"manager.maxRetainTTL=a week", "at '/manager/maxRetainTTL'"},
		{"daemon.kubeProxyMasqueradeBit=32", "at '/daemon/kubeProxyMasqueradeBit'"},
		{"underlay.bgpPasswordSecrets[0].namespace=x", "at '/underlay/bgpPasswordSecrets/0': missing property 'name'"},
	} {
		_, err := renderErr(t, "--set", c.set)
		if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: %v; want the schema's refusal %q", c.set, err, c.want)
		}
	}
	typo := valuesFile(t, []byte("daemon:\n  fastpath: false\n"))
	if _, err := renderErr(t, "--values", typo); err == nil || !strings.Contains(err.Error(), "additional properties 'fastpath' not allowed") {
		t.Errorf("values file with daemon.fastpath: %v; want it refused", err)
	}
}

// TestValuesSchemaCoversValues: every key of values.yaml is a property of
// the schema, down to the free-form maps (resources, nodeSelector, ...).
func TestValuesSchemaCoversValues(t *testing.T) {
	var values map[string]any
	var schema map[string]any
	for p, into := range map[string]any{"values.yaml": &values, "values.schema.json": &schema} {
		b, err := os.ReadFile(filepath.Join(chartDir, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if missing := uncovered(values, schema, schema, ""); len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("values.yaml keys the schema does not describe: %v", missing)
	}
}

// uncovered returns the keys of values that node (a schema object, $refs
// resolved against root) has no property for.
func uncovered(values map[string]any, node, root map[string]any, prefix string) []string {
	node = resolve(node, root)
	props, _ := node["properties"].(map[string]any)
	if props == nil {
		return nil // a free-form object
	}
	var out []string
	for k, v := range values {
		sub, ok := props[k].(map[string]any)
		if !ok {
			out = append(out, prefix+k)
			continue
		}
		if m, ok := v.(map[string]any); ok {
			out = append(out, uncovered(m, sub, root, prefix+k+".")...)
		}
	}
	return out
}

func resolve(node, root map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	def, _ := root["definitions"].(map[string]any)[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	return def
}

// The schema is valid JSON with the draft it names.
func TestValuesSchemaIsJSON(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Schema               string `json:"$schema"`
		AdditionalProperties bool   `json:"additionalProperties"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Schema != "http://json-schema.org/draft-07/schema#" || s.AdditionalProperties {
		t.Errorf("values.schema.json: %+v, %v; want draft-07 refusing unknown top-level keys", s, err)
	}
}
