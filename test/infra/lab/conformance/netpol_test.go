package conformance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// netpolSpecs are some of the Netpol suite's specs of v1.36.3, by full text.
var netpolSpecs = []string{
	"[sig-network] Netpol API should support creating NetworkPolicy API operations",
	"[sig-network] Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
	"[sig-network] Netpol NetworkPolicy between server and client should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP [Feature:NetworkPolicy]",
	"[sig-network] Netpol [LinuxOnly] NetworkPolicy between server and client using UDP should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
	"[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should support a 'default-deny-ingress' policy [Feature:NetworkPolicy]",
}

func TestNetworkPolicySelection(t *testing.T) {
	focus := regexp.MustCompile(NetworkPolicy)
	for _, n := range append(netpolSpecs, "[sig-network] Services should serve a basic endpoint from pods [Conformance]") {
		if got, want := focus.MatchString(n), strings.HasPrefix(n, "[sig-network] Netpol "); got != want {
			t.Errorf("focus matches %q = %v; want %v", n, got, want)
		}
	}
	ex := []Exclusion{NetworkPolicyExclusions[0]}
	ex[0].Holds = nil // as on a kernel without SCTP
	s, err := Select(netpolSpecs, ex)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Run) != 4 || len(s.Left) != 1 || !strings.Contains(s.Left[0].Name, "using SCTP") {
		t.Fatalf("Select = %+v; want every spec but the SCTP one to run", s)
	}
	if skip := regexp.MustCompile(SkipExpression(ex)); skip.MatchString(netpolSpecs[2]) {
		t.Errorf("skip %q leaves out the TCP spec about SCTP policies", skip)
	}
	var out strings.Builder
	s.Print(&out)
	if want := "5 specs match the focus: 4 run, 1 left out\n"; !strings.HasPrefix(out.String(), want) ||
		!strings.Contains(out.String(), "because "+ex[0].Reason) {
		t.Errorf("Print:\n%s", out.String())
	}
}

func TestActive(t *testing.T) {
	ex := []Exclusion{
		{Pattern: "a", Reason: "always"},
		{Pattern: "b", Reason: "holds", Holds: func() bool { return true }},
		{Pattern: "c", Reason: "does not hold", Holds: func() bool { return false }},
	}
	if got := SkipExpression(Active(ex)); got != "a|b" {
		t.Errorf("SkipExpression(Active) = %q; want a|b", got)
	}
	if got := SkipExpression(nil); got != "" {
		t.Errorf("SkipExpression(nil) = %q", got)
	}
	sctp := Active(NetworkPolicyExclusions[:1])
	if KernelHasSCTP() == (len(sctp) == 1) {
		t.Errorf("SCTP exclusion active = %v with KernelHasSCTP = %v", len(sctp) == 1, KernelHasSCTP())
	}
	if _, err := Select(nil, []Exclusion{{Pattern: "("}}); err == nil {
		t.Error("Select with a bad pattern: no error")
	}
}

// TestList runs List against a stand-in e2e.test that writes the report a
// dry run writes: the focused specs passed, the others skipped.
func TestList(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "e2e.test")
	script := `#!/bin/sh
for a; do case "$a" in --ginkgo.json-report=*) r=${a#*=};; --ginkgo.focus=*) f=${a#*=};; esac; done
[ "$f" = 'Netpol' ] || exit 3
cat > "$r" <<'JSON'
[{"SpecReports":[
 {"LeafNodeType":"SynchronizedBeforeSuite","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-network] Netpol","NetworkPolicy between server and client"],"LeafNodeText":"should b","LeafNodeType":"It","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-network] Netpol API"],"LeafNodeText":"should a","LeafNodeType":"It","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-network] DNS"],"LeafNodeText":"filtered","LeafNodeType":"It","State":"skipped"}
]}]
JSON
`
	if err := os.WriteFile(fake, []byte(script), 0o700); err != nil { //nolint:gosec // G306: an executable stand-in
		t.Fatal(err)
	}
	names, err := List(context.Background(), fake, "Netpol", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[sig-network] Netpol API should a", "[sig-network] Netpol NetworkPolicy between server and client should b"}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Errorf("List = %q; want %q", names, want)
	}
	if _, err := List(context.Background(), fake, "other", ""); err == nil {
		t.Error("List of a dry run that wrote no report: no error")
	}
}
