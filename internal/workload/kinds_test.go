package workload

import (
	"strings"
	"testing"
)

// ParseKinds takes the chart's list and refuses a bad entry, naming it and
// what is wrong with it.
func TestParseKinds(t *testing.T) {
	got, err := ParseKinds(`[{"group":"apps.kruise.io","version":"v1alpha1","kind":"CloneSet","ordinal":true},` +
		`{"group":"argoproj.io","version":"v1alpha1","kind":"Rollout","resource":"rollouts"}]`)
	if err != nil || len(got) != 2 || !got[0].Ordinal || got[0].RefKind() != "CloneSet.apps.kruise.io" || got[1].Resource != "rollouts" {
		t.Fatalf("ParseKinds = %+v, %v", got, err)
	}
	if got, err := ParseKinds(""); err != nil || got != nil {
		t.Fatalf("ParseKinds(\"\") = %+v, %v; want none", got, err)
	}
	ok := `{"group":"a.io","version":"v1","kind":"A"}`
	for _, c := range []struct{ in, want string }{
		{`{"group":"a.io"}`, "want a JSON list"},
		{`[` + ok + `,{"group":"b.io","version":"v1","kind":"B","ordinl":true}]`, `entry 1 ({"group":"b.io","version":"v1","kind":"B","ordinl":true}): json: unknown field "ordinl"`},
		{`[{"version":"v1","kind":"A"}]`, "entry 0 ({\"version\":\"v1\",\"kind\":\"A\"}): group: required"},
		{`[{"group":"A_b","version":"v1","kind":"A"}]`, `entry 0 ({"group":"A_b","version":"v1","kind":"A"}): group "A_b"`},
		{`[{"group":"a.io","version":"1.0","kind":"A"}]`, `version "1.0": not an API version`},
		{`[{"group":"a.io","version":"v1","kind":"clone set"}]`, `kind "clone set": want a kind such as CloneSet`},
		{`[{"group":"a.io","version":"v1","kind":"A","resource":"As"}]`, `resource "As"`},
		{`[{"group":"apps","version":"v1","kind":"Deployment"}]`, "kind Deployment.apps: estuary follows it already"},
		{`[` + ok + `,` + ok + `]`, "entry 1 (" + ok + "): kind A.a.io: listed twice"},
	} {
		if _, err := ParseKinds(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseKinds(%s) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}
