//go:build lab

package e2e_test

import (
	"strings"
	"testing"
	"time"
)

// TestNodeRulesNameEstuaryTables: on every node, `ip rule` names estuary's
// tables (rule 1000 appears with a node's first pod) (the daemon installed the routing plan's names for iproute2), and
// a table can be read back by its name.
func TestNodeRulesNameEstuaryTables(t *testing.T) {
	e := needLab(t)
	for _, node := range e.nodes {
		t.Run(node, func(t *testing.T) {
			out, err := e.run(testCtx(t, time.Minute), node, "ip", "rule", "show")
			if err != nil {
				t.Fatal(err)
			}
			// Rule 1000 exists once the node has a pod; wherever a rule of
			// estuary's is, it is named.
			if want := "1001:\tfrom all lookup estuary-overlay"; !strings.Contains(out, want) {
				t.Errorf("ip rule on %s lacks %q:\n%s", node, want, out)
			}
			for _, number := range []string{"lookup 1000", "lookup 1001", "lookup 1002"} {
				if strings.Contains(out, number) {
					t.Errorf("ip rule on %s prints %q, not the table's name:\n%s", node, number, out)
				}
			}
			if _, err := e.run(testCtx(t, time.Minute), node, "ip", "route", "show", "table", "estuary-overlay"); err != nil {
				t.Errorf("ip route show table estuary-overlay on %s: %v", node, err)
			}
		})
	}
}
