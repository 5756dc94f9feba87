package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool is $PROMTOOL, else promtool on the PATH, else the one
// hack/lab-deps.sh unpacks from Debian's prometheus package.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	cache := os.Getenv("ESTUARY_CACHE")
	if cache == "" {
		cache = "/var/cache/estuary"
	}
	p := filepath.Join(cache, "debs", "prometheus-root", "usr", "bin", "promtool")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("promtool is not installed (%v): run `make lab-deps` (hack/lab-deps.sh), or set PROMTOOL", err)
	}
	return p
}

// runPromtool runs promtool with args in dir and returns its output, failing
// the test when it exits non-zero.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// rulesCount is the number of alerts of the rule file.
const rulesCount = 12

// TestPrometheusRulesPassPromtool: the rule file, and the PrometheusRule
// the chart renders from it, pass `promtool check rules`, and its unit
// tests pass `promtool test rules`: each alert fires on the series that
// should raise it (a subnet at 5% free, CNI ADDs failing 6 times a minute,
// a BGP session down, a failing reconcile part, a manager and a daemon
// gone, a daemon pod gone with its target while the DaemonSet wants it,
// webhook calls failing, allocations failing for 15 minutes, replicas up
// and none leading) and not on the healthy ones beside (a rolling update
// that progresses, a denial, another vendor's webhook, one failed
// allocation, a leader change).
func TestPrometheusRulesPassPromtool(t *testing.T) {
	out := runPromtool(t, ".", "check", "rules", rulesFile)
	if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", rulesCount)) {
		t.Errorf("promtool check rules %s:\n%s", rulesFile, out)
	}
	rendered := find(t, render(t, "--set", "metrics.prometheusRule.enabled=true"), "PrometheusRule", "estuary")
	spec, err := yaml.Marshal(rendered.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "rendered-rules.yaml")
	if err := os.WriteFile(p, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runPromtool(t, ".", "check", "rules", p); !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", rulesCount)) {
		t.Errorf("promtool check rules on the rendered PrometheusRule:\n%s", out)
	}
	if out := runPromtool(t, ".", "test", "rules", "testdata/prometheus-rules-test.yaml"); !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// dashboardQueries parses the dashboard and returns every panel's queries
// by panel title; a panel (other than a row) without one fails the test.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardFile, err)
	}
	out := map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) != "" {
				out[p.Title] = append(out[p.Title], tg.Expr)
			}
		}
		if len(out[p.Title]) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
	}
	return out
}

// TestDashboardQueriesArePromQL: the dashboard parses, has the panels the
// operator looks for, and every panel's query is PromQL: each is checked by
// `promtool check rules` as a recording rule, with Grafana's
// $__rate_interval replaced by the 5m window Grafana would put there.
func TestDashboardQueriesArePromQL(t *testing.T) {
	queries := dashboardQueries(t)
	for _, want := range []string{"CNI ADD latency", "CNI DEL latency", "CNI errors by reason", "IPAM usage per subnet",
		"Reconcile duration", "Reconcile failures", "BGP peers up", "Webhook latency"} {
		if len(queries[want]) == 0 {
			t.Errorf("dashboard has no panel %q", want)
		}
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for title, exprs := range queries {
		for _, e := range exprs {
			name := fmt.Sprintf("dashboard:%s:%d", regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(title), "_"), len(rules))
			rules = append(rules, rule{Record: name, Expr: strings.ReplaceAll(e, "$__rate_interval", "5m")})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runPromtool(t, ".", "check", "rules", p); !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(rules))) {
		t.Errorf("promtool check rules on the dashboard's %d queries:\n%s", len(rules), out)
	}
}

// TestAlertsAndDashboardUseDocumentedMetrics: every estuary_ metric the
// alerts and the dashboard query is one docs/metrics.md lists (a histogram
// by its name, without _bucket, _count or _sum), so a renamed metric cannot
// leave them querying nothing.
func TestAlertsAndDashboardUseDocumentedMetrics(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	text = append(text, string(rules))
	for _, exprs := range dashboardQueries(t) {
		text = append(text, exprs...)
	}
	names := regexp.MustCompile(`estuary_[a-z_]+`)
	for _, s := range text {
		for _, n := range names.FindAllString(s, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			if !strings.Contains(string(doc), "`"+base+"`") {
				t.Errorf("%s is queried but docs/metrics.md does not list `%s`", n, base)
			}
		}
	}
}
