package uninstall

import (
	"context"
	"strings"
	"testing"
)

// TestOutcomeNamesEveryNode: a wait that ended names the nodes that did
// not answer, an answer with an error names its node and error, and a
// report where every node answered cleanly is no error.
func TestOutcomeNamesEveryNode(t *testing.T) {
	r := Report{Request: "uninstall-x", Nodes: []NodeResult{
		{Node: "n1", Answered: true},
		{Node: "n2", Answered: true, Error: "remove estvx4: busy"},
		{Node: "n3"},
	}}
	err := outcome(r, context.DeadlineExceeded)
	for _, want := range []string{"n3", "n2: remove estvx4: busy", "1 node(s) did not answer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("outcome = %v; want it to name %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "n1") {
		t.Errorf("outcome names n1, which answered cleanly: %v", err)
	}
	clean := Report{Request: "uninstall-y", Nodes: []NodeResult{{Node: "n1", Answered: true}}}
	if err := outcome(clean, nil); err != nil {
		t.Errorf("outcome of a clean report = %v", err)
	}
	if err := outcome(Report{Request: "uninstall-z"}, context.DeadlineExceeded); err == nil {
		t.Error("a wait that ended with no daemon pod found is no error")
	}
}
