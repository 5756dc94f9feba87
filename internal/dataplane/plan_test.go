package dataplane_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
)

// TestRoutingPlanOwnersAreDisjoint: the writers' ownerships come from the
// routing plan, never overlap (no writer deletes another's routes or
// rules), leave table 1000 to podnet, and all fall inside the default
// ownership that finds leftovers.
func TestRoutingPlanOwnersAreDisjoint(t *testing.T) {
	all := state.DefaultOwnership()
	ov, ul := overlay.Ownership(), underlay.Ownership()
	type span struct {
		name     string
		min, max int
	}
	spans := []span{
		{"podnet", state.TableLocalPods, state.TableLocalPods},
		{"overlay tables", ov.TableMin, ov.TableMax},
		{"underlay tables", ul.TableMin, ul.TableMax},
	}
	for i, a := range spans {
		if a.min < all.TableMin || a.max > all.TableMax {
			t.Errorf("%s [%d, %d] outside the default ownership [%d, %d]", a.name, a.min, a.max, all.TableMin, all.TableMax)
		}
		for _, b := range spans[i+1:] {
			if a.min <= b.max && b.min <= a.max {
				t.Errorf("%s [%d, %d] overlaps %s [%d, %d]", a.name, a.min, a.max, b.name, b.min, b.max)
			}
		}
	}
	if ov.PriorityMin != ov.TableMin || ov.PriorityMax != ov.TableMax || ul.PriorityMin != ul.TableMin || ul.PriorityMax != ul.TableMax {
		t.Errorf("a writer's rule priorities differ from its tables: overlay %+v, underlay %+v", ov, ul)
	}
	if ov.TableMin != state.TableOverlaySubnets || state.TableOverlayNodes > ov.TableMax || ul.TableMin != state.TableUnderlayFirst {
		t.Errorf("ownerships do not start at the plan's tables: overlay %+v, underlay %+v", ov, ul)
	}
	if underlay.Slots != state.TableUnderlayLast-state.TableUnderlayFirst+1 {
		t.Errorf("underlay slots %d do not fill the plan's range", underlay.Slots)
	}
}

func TestTableNames(t *testing.T) {
	for table, want := range map[int]string{
		1000: "estuary-local-pods", 1001: "estuary-overlay", 1002: "estuary-overlay-nodes",
		1100: "estuary-underlay-0", 1999: "estuary-underlay-899", 1003: "", 254: "", 2000: "",
	} {
		if got := state.TableName(table); got != want {
			t.Errorf("TableName(%d) = %q, want %q", table, got, want)
		}
	}
}

func TestRTTablesConf(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(string(state.RTTablesConf()), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "#") {
		t.Fatalf("first line %q is not a comment", lines[0])
	}
	names := lines[1:]
	if len(names) != 3+underlay.Slots {
		t.Fatalf("%d names, want %d", len(names), 3+underlay.Slots)
	}
	for _, want := range []string{"1000\testuary-local-pods", "1001\testuary-overlay", "1002\testuary-overlay-nodes", "1100\testuary-underlay-0", "1999\testuary-underlay-899"} {
		if !slices.Contains(names, want) {
			t.Errorf("names lack %q", want)
		}
	}
}
