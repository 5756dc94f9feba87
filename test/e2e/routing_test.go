//go:build lab

package e2e_test

import (
	"strings"
	"testing"
	"time"
)

// TestNodeRulesNameEstuaryTables: on every node, `ip rule` names estuary's
// tables (the daemon installed the routing plan's names for iproute2), and
// a table can be read back by its name.
func TestNodeRulesNameEstuaryTables(t *testing.T) {
	e := needLab(t)
	for _, node := range e.nodes {
		t.Run(node, func(t *testing.T) {
			out, err := e.run(testCtx(t, time.Minute), node, "ip", "rule", "show")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"1000:\tfrom all lookup estuary-local-pods", "1001:\tfrom all lookup estuary-overlay"} {
				if !strings.Contains(out, want) {
					t.Errorf("ip rule on %s lacks %q:\n%s", node, want, out)
				}
			}
			if _, err := e.run(testCtx(t, time.Minute), node, "ip", "route", "show", "table", "estuary-overlay"); err != nil {
				t.Errorf("ip route show table estuary-overlay on %s: %v", node, err)
			}
		})
	}
}
