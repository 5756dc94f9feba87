package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestReadReport(t *testing.T) {
	report := `[{"SpecReports":[
 {"LeafNodeType":"SynchronizedBeforeSuite","State":"passed"},
 {"ContainerHierarchyTexts":["[sig-network] DNS"],"LeafNodeText":"should provide DNS for services [Conformance]","LeafNodeType":"It","State":"passed","RunTime":2000000000},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeText":"should serve a basic endpoint","LeafNodeType":"It","State":"failed","RunTime":1000000000,"Failure":{"Message":"service is not reachable"}},
 {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeText":"needs IPv6","LeafNodeType":"It","State":"skipped","Failure":{"Message":"Requires at least one IPv6 node"}},
 {"ContainerHierarchyTexts":["[sig-storage] Volumes"],"LeafNodeText":"filtered out","LeafNodeType":"It","State":"skipped"}
]}]`
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Specs) != 3 {
		t.Fatalf("specs = %+v; want the passed, failed and run-time skipped ones", s.Specs)
	}
	if p, f, sk := s.Count(); p != 1 || f != 1 || sk != 1 {
		t.Errorf("Count = %d, %d, %d; want 1, 1, 1", p, f, sk)
	}
	if got := s.Line(); got != "1 passed, 1 failed (1 skipped at run time)" {
		t.Errorf("Line = %q", got)
	}
	var out strings.Builder
	s.Print(&out)
	if !strings.Contains(out.String(), "service is not reachable") || strings.Contains(out.String(), "filtered out") {
		t.Errorf("Print:\n%s", out.String())
	}
	if _, err := ReadReport(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("ReadReport of a missing file: no error")
	}
}

func TestArgs(t *testing.T) {
	a := strings.Join(Options{E2ETest: "e2e.test", Kubeconfig: "/k", Kubectl: "/bin/kubectl", Focus: NetworkConformance,
		Skip: SkipDefault, ReportDir: "/r"}.Args(), " ")
	for _, want := range []string{"--kubeconfig=/k", "--kubectl-path=/bin/kubectl", "--ginkgo.json-report=/r/report.json",
		`--ginkgo.focus=\[sig-network\].*\[Conformance\]`, "--ginkgo.skip=" + SkipDefault} {
		if !strings.Contains(a, want) {
			t.Errorf("args %q lack %q", a, want)
		}
	}
}

func TestDualStackSelection(t *testing.T) {
	focus, skip := regexp.MustCompile(DualStack), regexp.MustCompile(SkipDualStack)
	for name, want := range map[string]bool{
		"[sig-network] [Feature:IPv6DualStack] should have at least one dual-stack node":                                                                                   true,
		"[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: udp":                             true,
		"[sig-network] Networking Granular Checks: Services should function for node-Service: http":                                                                        true,
		"[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: sctp [Feature:SCTPConnectivity]": false,
		"[sig-network] Networking Granular Checks: Services should function for service endpoints using hostNetwork":                                                       true,
		"[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for service endpoints using hostNetwork":          true,
		"[sig-network] Networking Granular Checks: Services should update nodePort: udp [Slow]":                                                                            true,
		"[sig-network] Services should serve a basic endpoint from pods [Conformance]":                                                                                     false,
		"[sig-network] [Feature:IPv6DualStack] [Serial] something that must run alone":                                                                                     false,
	} {
		if got := focus.MatchString(name) && !skip.MatchString(name); got != want {
			t.Errorf("%q selected = %v; want %v", name, got, want)
		}
	}
}
