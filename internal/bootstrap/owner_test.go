package bootstrap_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/estuary-cni/estuary/internal/bootstrap"
)

func TestParseOwner(t *testing.T) {
	rbac := schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	core := schema.GroupVersion{Version: "v1"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{rbac, core})
	mapper.Add(rbac.WithKind("ClusterRole"), meta.RESTScopeRoot)
	mapper.Add(core.WithKind("ConfigMap"), meta.RESTScopeNamespace)

	o, err := bootstrap.ParseOwner("ClusterRole.rbac.authorization.k8s.io/estuary-bootstrap", mapper)
	if err != nil || o.GroupVersionKind != rbac.WithKind("ClusterRole") || o.Name != "estuary-bootstrap" {
		t.Errorf("ParseOwner: %+v, %v", o, err)
	}
	for in, want := range map[string]string{
		"ConfigMap/estuary-bootstrap":            "namespaced",
		"ClusterRole.rbac.authorization.k8s.io":  "<kind>.<group>/<name>",
		"Widget.example.com/w":                   "Widget.example.com/w",
		"ClusterRole.rbac.authorization.k8s.io/": "<kind>.<group>/<name>",
	} {
		if _, err := bootstrap.ParseOwner(in, mapper); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseOwner(%q): %v; want an error saying %q", in, err, want)
		}
	}
}
