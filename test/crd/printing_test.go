package crd

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestEveryKindIsInTheEstuaryCategory: discovery lists every resource of
// networking.estuary.io/v1 in the category estuary, so `kubectl get
// estuary` shows all of them.
func TestEveryKindIsInTheEstuaryCategory(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(kube)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion(estuaryv1.GroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range list.APIResources {
		if slices.Contains(r.Categories, "estuary") {
			kinds = append(kinds, r.Kind)
		} else if !strings.Contains(r.Name, "/") { // a subresource (status) has none
			t.Errorf("%s (%s) is not in the estuary category: categories %v", r.Kind, r.Name, r.Categories)
		}
	}
	slices.Sort(kinds)
	if want := []string{"IPHistory", "IPInstance", "Network", "Subnet"}; !slices.Equal(kinds, want) {
		t.Errorf("kinds in the estuary category = %v, want %v", kinds, want)
	}
}

// table asks the API server for resource as a Table, as kubectl get does,
// and returns the column names and the cells of the row of name.
func table(t *testing.T, resource, name string) (columns []string, cells map[string]any) {
	t.Helper()
	cfg := rest.CopyConfig(kube)
	cfg.GroupVersion = &estuaryv1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().Resource(resource).Name(name).Param("includeObject", "None").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx(t))
	if err != nil {
		t.Fatalf("get %s %s as a table: %v", resource, name, err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatalf("decode table: %v\n%s", err, raw)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("table of %s %s has %d rows", resource, name, len(tbl.Rows))
	}
	cells = map[string]any{}
	for i, c := range tbl.ColumnDefinitions {
		columns = append(columns, c.Name)
		if i < len(tbl.Rows[0].Cells) {
			cells[c.Name] = tbl.Rows[0].Cells[i]
		}
	}
	return columns, cells
}

// TestPrinterColumns: kubectl get shows a Network's type and its BGP
// sessions' condition, a Subnet's network, CIDR and usage, and an
// IPInstance's address, pod and phase.
func TestPrinterColumns(t *testing.T) {
	nw := decode(t, network("print-bgp", bgpSpec))
	if err := k8s.Create(ctx(t), nw); err != nil {
		t.Fatal(err)
	}
	cleanup(t, nw)
	nw = get(t, nw)
	conditions := []any{map[string]any{"type": estuaryv1.ConditionBGPPeersEstablished, "status": "True",
		"reason": "AllNodesEstablished", "message": "every node has a session up",
		"lastTransitionTime": "2026-01-02T03:04:05Z"}}
	if err := unstructured.SetNestedSlice(nw.Object, conditions, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Status().Update(ctx(t), nw); err != nil {
		t.Fatalf("write the network's condition: %v", err)
	}
	sn := decode(t, subnet("print-v4", v4RangeSpec))
	if err := k8s.Create(ctx(t), sn); err != nil {
		t.Fatal(err)
	}
	cleanup(t, sn)
	ipi := decode(t, ipInstance("", ipiSpec, "Bound"))
	if err := k8s.Create(ctx(t), ipi); err != nil {
		t.Fatal(err)
	}
	cleanup(t, ipi)

	for _, c := range []struct {
		resource, name string
		want           map[string]any
	}{
		{"networks", nw.GetName(), map[string]any{"Type": "Underlay", "Mode": "BGP", "BGP": "True"}},
		{"subnets", sn.GetName(), map[string]any{"Network": "n1", "CIDR": "10.1.0.0/24", "Used": nil, "Available": nil}},
		{"ipinstances", ipi.GetName(), map[string]any{"IP": "10.1.0.7/24", "Pod": "p", "Phase": "Bound"}},
	} {
		columns, cells := table(t, c.resource, c.name)
		for col, want := range c.want {
			if !slices.Contains(columns, col) {
				t.Errorf("%s: no column %s among %v", c.resource, col, columns)
				continue
			}
			if want != nil && fmt.Sprint(cells[col]) != fmt.Sprint(want) {
				t.Errorf("%s %s: column %s = %v, want %v", c.resource, c.name, col, cells[col], want)
			}
		}
	}
}
