package chart

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The runbook every alert links to, and where its rules are unit-tested.
const (
	troubleshootingDoc = "../../docs/troubleshooting.md"
	runbookBase        = "https://github.com/estuary-cni/estuary/blob/main/docs/troubleshooting.md#"
	rulesTestFile      = "testdata/prometheus-rules-test.yaml"
)

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// ruleTests is the part of a promtool unit-test file the tests read.
type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertHasARunbookAndBothCases: every alert of the rule file has a
// runbook_url naming a section of docs/troubleshooting.md that exists (a
// "### <AlertName>" heading, GitHub's anchor), and its promtool unit tests
// check it both firing and silent.
func TestEveryAlertHasARunbookAndBothCases(t *testing.T) {
	var rules ruleFile
	readYAML(t, rulesFile, &rules)
	var tests ruleTests
	readYAML(t, rulesTestFile, &tests)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	doc, err := os.ReadFile(troubleshootingDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^### (\S+)\s*$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			url := r.Annotations["runbook_url"]
			if want := runbookBase + strings.ToLower(r.Alert); url != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, url, want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s: %s has no \"### %s\" section", r.Alert, troubleshootingDoc, r.Alert)
			}
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("%s: unit tests check it firing %t, silent %t; want both", r.Alert, fires[r.Alert], silent[r.Alert])
			}
		}
	}
	if n != rulesCount {
		t.Errorf("%d alerts in %s, want %d", n, rulesFile, rulesCount)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
