package desired

import (
	"os/exec"
	"strings"
	"testing"
)

// pureDeps are the only packages outside the standard library that the
// state package may depend on: estuary's own packages that are pure Go on
// the standard library themselves.
var pureDeps = map[string]bool{
	"github.com/estuary-cni/estuary/internal/dataplane/desired": true,
	"github.com/estuary-cni/estuary/pkg/family":                 true,
}

// TestImportsStandardLibraryOnly keeps the package pure: the diff must be
// testable without a kernel, so nothing in its whole dependency graph may be
// netlink or any other module; only the standard library and the pure
// packages above.
func TestImportsStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, path := range strings.Fields(string(out)) {
		if !pureDeps[path] {
			t.Errorf("the state package depends on %s: it must use only the standard library and %v", path, pureDeps)
		}
	}
}
