package layering

import (
	"reflect"
	"testing"
)

// TestFolderCirclesFindCirclesAtEveryDepth: the circle finder names rooms
// tied through packages several folders apart, and subfolders tied to their
// parent's package, and nothing in a graph without a circle.
func TestFolderCirclesFindCirclesAtEveryDepth(t *testing.T) {
	g := graph{
		"internal/a/x":   {"internal/b/y/z"},
		"internal/b/y/z": {"internal/b"},
		"internal/b":     {"internal/a"},
		"internal/a":     nil,
		"internal/c":     {"internal/c/d"},
		"internal/c/d":   {"internal/c/e"},
		"internal/c/e/f": {"internal/c"},
		"internal/g":     {"internal/a"},
	}
	want := []circle{
		{folder: "internal", edges: []string{"internal/a/x -> internal/b/y/z", "internal/b -> internal/a"}},
		{folder: "internal/c", edges: []string{"internal/c -> internal/c/d", "internal/c/d -> internal/c/e", "internal/c/e/f -> internal/c"}},
	}
	if got := folderCircles(g); !reflect.DeepEqual(got, want) {
		t.Errorf("circles = %+v, want %+v", got, want)
	}
	delete(g, "internal/b")
	delete(g, "internal/c/e/f")
	if got := folderCircles(g); len(got) != 0 {
		t.Errorf("circles without a circle = %+v", got)
	}
}

// TestImportProblemRefusesUpwardAndWalledImports: a lower layer importing a
// higher one and the manager importing the node's rooms are refused; a
// downward import, a same-layer import and a test package are not.
func TestImportProblemRefusesUpwardAndWalledImports(t *testing.T) {
	for _, c := range []struct {
		from, to string
		refused  bool
	}{
		{"internal/dataplane/ops", "internal/daemon/datapath", true},
		{"pkg/ipam", "internal/version", true},
		{"internal/controller/podipam", "internal/dataplane/desired", true},
		{"internal/daemon", "internal/dataplane/ops", false},
		{"internal/cnibackend", "internal/cniserver", false},
		{"cmd/estuary-daemon", "internal/daemon", false},
		{"internal/daemon", "test/infra/lab", false}, // TestProductImportsNoTestInfrastructure's job
	} {
		lf, ok := layerOf(c.from)
		if !ok {
			t.Fatalf("%s in no layer", c.from)
		}
		if p := importProblem(c.from, lf, c.to); (p != "") != c.refused {
			t.Errorf("%s -> %s: problem %q, want refused %v", c.from, c.to, p, c.refused)
		}
	}
}
