package dataplane_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
)

// TestRoutingPlanOwnersAreDisjoint: every writer's ownership comes from the
// routing plan by its name, the writers never overlap (no writer deletes
// another's routes or rules), each rule priority equals its table, and all
// fall inside the default ownership that finds leftovers.
func TestRoutingPlanOwnersAreDisjoint(t *testing.T) {
	all := desired.DefaultOwnership()
	if ov := overlay.Ownership(); ov.Owner != desired.OwnerOverlay || ov.TableMin != desired.TableOverlaySubnets {
		t.Errorf("overlay's ownership is not the plan's: %+v", ov)
	}
	if ul := underlay.Ownership(); ul.Owner != desired.OwnerUnderlay || ul.TableMin != desired.TableUnderlayFirst {
		t.Errorf("underlay's ownership is not the plan's: %+v", ul)
	}
	type span struct {
		name     string
		min, max int
	}
	var tables, rules []span
	for _, o := range desired.Owners() {
		own := o.Ownership()
		if own.Owner != o {
			t.Errorf("%s: ownership names %q", o, own.Owner)
		}
		tables = append(tables, span{string(o) + " tables", own.TableMin, own.TableMax})
		if own.PriorityMin <= own.PriorityMax {
			rules = append(rules, span{string(o) + " rules", own.PriorityMin, own.PriorityMax})
			if own.PriorityMin != own.TableMin || own.PriorityMax != own.TableMax {
				t.Errorf("%s: rule priorities [%d, %d] differ from its tables [%d, %d]", o, own.PriorityMin, own.PriorityMax, own.TableMin, own.TableMax)
			}
		}
	}
	for _, spans := range [][]span{tables, rules} {
		for i, a := range spans {
			if a.min > a.max || a.min < all.TableMin || a.max > all.TableMax {
				t.Errorf("%s [%d, %d] empty or outside the default ownership [%d, %d]", a.name, a.min, a.max, all.TableMin, all.TableMax)
			}
			for _, b := range spans[i+1:] {
				if a.min <= b.max && b.min <= a.max {
					t.Errorf("%s [%d, %d] overlaps %s [%d, %d]", a.name, a.min, a.max, b.name, b.min, b.max)
				}
			}
		}
	}
	if lp := desired.OwnerLocalPods.Ownership(); lp.TableMin != desired.TableLocalPods || lp.TableMax != desired.TableLocalPods ||
		lp.OwnsRule(desired.Rule{Priority: desired.PriorityLocalPods, Table: desired.TableLocalPods}) {
		t.Errorf("local-pods must own table 1000 and no rule (the shared rule is never deleted): %+v", lp)
	}
	if unknown := desired.Owner("nobody").Ownership(); unknown.OwnsRoute(desired.Route{Table: 0}) || unknown.OwnsRule(desired.Rule{Priority: 0}) {
		t.Errorf("an unknown owner owns table or priority 0: %+v", unknown)
	}
	if underlay.Slots != desired.TableUnderlayLast-desired.TableUnderlayFirst+1 {
		t.Errorf("underlay slots %d do not fill the plan's range", underlay.Slots)
	}
}

func TestTableNames(t *testing.T) {
	for table, want := range map[int]string{
		1000: "estuary-local-pods", 1001: "estuary-overlay", 1002: "estuary-overlay-nodes",
		1100: "estuary-underlay-0", 1999: "estuary-underlay-899", 1003: "", 254: "", 2000: "",
	} {
		if got := desired.TableName(table); got != want {
			t.Errorf("TableName(%d) = %q, want %q", table, got, want)
		}
	}
}

func TestRTTablesConf(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(string(desired.RTTablesConf()), "\n"), "\n")
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
