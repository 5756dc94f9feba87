package policydrops

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestRingKeepsTheMostRecent(t *testing.T) {
	r := NewRing(3)
	if got := r.Report("n1"); len(got.Drops) != 0 || got.Lost != 0 || got.Drops == nil {
		t.Fatalf("empty ring reports %+v", got)
	}
	for i := range 5 {
		r.Add(Drop{HostVeth: fmt.Sprintf("est%d", i)})
	}
	got := r.Report("n1")
	var veths []string
	for _, d := range got.Drops {
		veths = append(veths, d.HostVeth)
	}
	if strings.Join(veths, ",") != "est2,est3,est4" || got.Lost != 2 || got.Node != "n1" {
		t.Fatalf("after 5 drops in a ring of 3: %v lost %d node %q; want est2,est3,est4 lost 2 node n1", veths, got.Lost, got.Node)
	}
}

// The JSON a Report encodes to is what the kubectl plugin decodes: an
// empty ring is an empty list, not null.
func TestEmptyReportJSON(t *testing.T) {
	b, err := json.Marshal(NewRing(1).Report("n"))
	if err != nil || string(b) != `{"node":"n","drops":[],"lost":0}` {
		t.Fatalf("got %s, %v", b, err)
	}
}
