package cli

import (
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/nodereport"
)

// TestRedactReportTreatsASectionAsOneDocument: a credential in node state
// whose value spans lines (a block scalar, a quoted value broken over
// lines) is scrubbed whole, a one-line credential and a section's error
// too, and the lines around them are kept.
func TestRedactReportTreatsASectionAsOneDocument(t *testing.T) {
	const leak = "hunter2-node-state-secret"
	r := nodereport.Report{Sections: []nodereport.Section{
		{Name: "config", Lines: []string{"bgp:", "  password: |", "    " + leak, "    more " + leak, "  peer: 10.0.0.1"}},
		{Name: "conflist", Lines: []string{`{"token": "first`, `  ` + leak + `"}`, `"type": "estuary"`}},
		{Name: "journal", Lines: []string{"msg=peer up secret=" + leak}},
		{Name: "routes", Lines: []string{"10.244.0.5 dev est1 proto estuary"}, Error: "read: token=" + leak},
	}}
	if n := redactReport(&r); n != 4 {
		t.Errorf("redactReport replaced %d values, want 4", n)
	}
	for _, s := range r.Sections {
		all := strings.Join(s.Lines, "\n") + s.Error
		if strings.Contains(all, leak) {
			t.Errorf("section %s kept the credential: %q", s.Name, all)
		}
	}
	if got := strings.Join(r.Sections[0].Lines, "\n"); got != "bgp:\n  password: REDACTED\n  peer: 10.0.0.1" {
		t.Errorf("config section = %q", got)
	}
	if got := r.Sections[3].Lines; len(got) != 1 || got[0] != "10.244.0.5 dev est1 proto estuary" {
		t.Errorf("a section with no credential changed: %q", got)
	}
}
