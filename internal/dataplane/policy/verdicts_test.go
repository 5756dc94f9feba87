package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestPolicyOf(t *testing.T) {
	for id, want := range map[string][2]string{
		"np/ns/web/ingress/0":        {"np", "ns/web"},
		"np/ns/web/egress/1/tcp-80":  {"np", "ns/web"},
		"cnp/deny-db/egress/2":       {"cnp", "deny-db"},
		"cnp/anp:tenant-a/egress/0":  {"anp", "tenant-a"},
		"cnp/banp:default/ingress/0": {"banp", "default"},
		"cnp/odd:x/ingress/0":        {"cnp", "odd:x"},
		"banp/default/ingress/0":     {"banp", "default"},
		"":                           {"", ""},
		"np/ns":                      {"np", "ns"},
		"x":                          {"", ""},
	} {
		if k, p := ObjectOf(id); k != want[0] || p != want[1] {
			t.Errorf("ObjectOf(%q) = %q, %q, want %q", id, k, p, want)
		}
	}
}

// TestCountersAndLogs: each deciding rule counts into its policy object's
// counter for its direction and verdict, shared by every pod; the
// isolation drop counts into the isolation counter; each drop is logged
// first with a prefix naming direction, veth and policy.
func TestCountersAndLogs(t *testing.T) {
	np := Rule{ID: "np/ns/web/ingress/0", Peers: peers("10.1.0.0/16"), Ports: []Port{tcp80}}
	deny := AdminRule{Rule{ID: "cnp/deny-db/ingress/0", Peers: peers("10.2.0.0/16")}, Deny}
	pass := AdminRule{Rule{ID: "cnp/pass-all/ingress/0", Peers: anyone}, Pass}
	in := Direction{Admin: []AdminRule{deny, pass}, Isolated: true, Allow: []Rule{np}}
	rs, err := Compile(Node{Endpoints: []Endpoint{{HostVeth: "esta", Ingress: in}, {HostVeth: "estb", Ingress: in}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rs.Counters {
		got = append(got, c.Kind+" "+c.Policy+" "+c.Direction+" "+c.Verdict)
	}
	slices.Sort(got)
	want := []string{"cnp deny-db ingress drop", "cnp pass-all ingress pass", "isolation  ingress drop", "np ns/web ingress accept"}
	if !slices.Equal(got, want) {
		t.Fatalf("counters %q, want %q (one per object, direction and verdict, shared by both pods)", got, want)
	}
	byName := map[string]Counter{}
	for _, c := range rs.Counters {
		byName[c.Name] = c
	}
	for _, ch := range rs.Chains {
		for i, r := range ch.Rules {
			fallThrough := r.Verdict == Goto && r.Set == "" && r.Protocol == 0 && i == len(ch.Rules)-1
			if r.Verdict != 0 && r.Counter == "" && !fallThrough {
				t.Errorf("%s rule %d %q counts nothing", ch.Name, i, r)
			}
			if r.Verdict != Drop {
				continue
			}
			if i == 0 || ch.Rules[i-1].LogPrefix == "" || ch.Rules[i-1].Set != r.Set {
				t.Fatalf("%s: drop rule %q is not preceded by its log rule", ch.Name, r)
			}
			veth := strings.TrimPrefix(strings.TrimSuffix(ch.Name, "-np"), "i-")
			wantPrefix := "estuary-drop ingress " + veth + " " + map[string]string{"": "-"}[byName[r.Counter].Ref()]
			if byName[r.Counter].Ref() != "" {
				wantPrefix = "estuary-drop ingress " + veth + " cnp/deny-db"
			}
			if p := ch.Rules[i-1].LogPrefix; p != wantPrefix {
				t.Errorf("%s: log prefix %q, want %q", ch.Name, p, wantPrefix)
			}
			if s := ch.Rules[i-1].String(); !strings.Contains(s, `limit name "drop-log" log prefix`) || strings.Contains(s, "counter") {
				t.Errorf("log rule renders %q", s)
			}
		}
	}
	if o := Diff(rs, readBack(rs)); !o.Empty() {
		t.Errorf("the same ruleset read back differs:\n%s", o)
	}
	noDeny := in
	noDeny.Admin = []AdminRule{pass}
	rs2, err := Compile(Node{Endpoints: []Endpoint{{HostVeth: "esta", Ingress: noDeny}, {HostVeth: "estb", Ingress: noDeny}}})
	if err != nil {
		t.Fatal(err)
	}
	o := Diff(rs2, readBack(rs))
	if len(o.DelCounters) != 1 || byName[o.DelCounters[0]].Policy != "deny-db" || len(o.AddCounters) != 0 {
		t.Errorf("removing the deny rule should delete its counter alone:\n%s", o)
	}
}

func TestWithoutDropLog(t *testing.T) {
	rs, err := Compile(Node{Endpoints: []Endpoint{{HostVeth: "esta", Ingress: Direction{Isolated: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := rs.WithoutDropLog()
	if tags(got.Chains[0].Rules)[0] != `counter name "`+rs.Counters[0].Name+`" drop` || len(got.Chains[0].Rules) != 1 {
		t.Errorf("without the log: %q", tags(got.Chains[0].Rules))
	}
	if len(rs.Chains[0].Rules) != 2 {
		t.Errorf("WithoutDropLog changed its receiver: %q", tags(rs.Chains[0].Rules))
	}
}
