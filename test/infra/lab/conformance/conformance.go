// Package conformance runs the upstream Kubernetes end-to-end tests (the
// e2e.test binary of the pinned Kubernetes version, built from the Go module
// proxy by hack/kube-binaries.sh) against a lab cluster and reads their
// result: which specs ran, passed, failed or were skipped, and why a failed
// one failed. Nothing here knows about estuary; the lab chooses the focus.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Focus and skip expressions (ginkgo regular expressions over the full spec
// text) of the runs the lab knows.
const (
	// NetworkConformance is every [sig-network] spec tagged [Conformance].
	NetworkConformance = `\[sig-network\].*\[Conformance\]`
	// NetworkAll is every [sig-network] spec; SkipDefault narrows it to those
	// that fit an offline two-core lab.
	NetworkAll = `\[sig-network\]`
	// SkipDefault leaves out what needs more than one lab gives: specs that must
	// run alone or break the cluster, slow ones, optional features, and flaky
	// ones, as upstream's own conformance jobs do.
	SkipDefault = `\[Serial\]|\[Disruptive\]|\[Slow\]|\[Feature:|\[Flaky\]|\[FeatureGate:|\[Alpha\]|\[Beta\]`
	// DualStack is the run for a dual-stack lab: every [Feature:IPv6DualStack]
	// spec (pods and nodes with both families, Services of either or both, and
	// the Granular Checks over the secondary family) and the Networking
	// Granular Checks over the primary one.
	DualStack = `\[sig-network\] (\[Feature:IPv6DualStack\]|Networking Granular Checks)`
	// SkipDualStack narrows DualStack as SkipDefault does, but keeps the
	// feature tag it is about and the two [Slow] checks of a NodePort's update
	// (about a minute each); SCTP goes, as the lab's kernel has none.
	SkipDualStack = `\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:SCTPConnectivity\]|\[FeatureGate:|\[Alpha\]|\[Beta\]`
)

// Options says what to run and where.
type Options struct {
	E2ETest    string        // path of the e2e.test binary
	Kubeconfig string        // admin kubeconfig of the cluster
	Kubectl    string        // the kubectl the tests run (the pinned version's)
	Focus      string        // ginkgo focus expression
	Skip       string        // ginkgo skip expression
	ReportDir  string        // where the JSON report and logs go
	Timeout    time.Duration // the whole run's limit (ginkgo.timeout)
	Output     io.Writer     // where e2e.test's own output goes (nil: discarded)
	Extra      []string      // further e2e.test flags
}

// Args returns e2e.test's command line for o.
func (o Options) Args() []string {
	args := []string{
		"--kubeconfig=" + o.Kubeconfig,
		"--provider=skeleton",
		"--kubectl-path=" + o.Kubectl,
		"--report-dir=" + o.ReportDir,
		"--ginkgo.focus=" + o.Focus,
		"--ginkgo.json-report=" + ReportFile(o.ReportDir),
		"--ginkgo.no-color",
		"--ginkgo.timeout=" + o.Timeout.String(),
		"--dump-logs-on-failure=false",
	}
	if o.Skip != "" {
		args = append(args, "--ginkgo.skip="+o.Skip)
	}
	return append(args, o.Extra...)
}

// ReportFile is the ginkgo JSON report a run in dir writes.
func ReportFile(dir string) string { return filepath.Join(dir, "report.json") }

// Run runs e2e.test with o and reads its report. A run whose specs failed is
// not an error here: the summary says so; an error means no report was made.
func Run(ctx context.Context, o Options) (Summary, error) {
	if err := os.MkdirAll(o.ReportDir, 0o750); err != nil {
		return Summary{}, fmt.Errorf("create report dir %s: %w", o.ReportDir, err)
	}
	_ = os.Remove(ReportFile(o.ReportDir))
	cmd := exec.CommandContext(ctx, o.E2ETest, o.Args()...) //nolint:gosec // G204: the caller's e2e.test
	cmd.Stdout, cmd.Stderr = o.Output, o.Output
	cmd.Dir = o.ReportDir
	start := time.Now()
	runErr := cmd.Run()
	s, err := ReadReport(ReportFile(o.ReportDir))
	if err != nil {
		return Summary{}, fmt.Errorf("e2e.test left no report: %w", errors.Join(err, runErr))
	}
	s.Elapsed = time.Since(start)
	return s, nil
}

// Spec is one spec's result.
type Spec struct {
	Name    string        // the full text, containers and leaf
	State   string        // passed, failed, skipped, pending, panicked, interrupted, timedout, aborted
	RunTime time.Duration // how long it ran
	Failure string        // the failure message, for a spec that did not pass
}

// Failed reports whether the spec ran and did not pass.
func (s Spec) Failed() bool {
	switch s.State {
	case "passed", "skipped", "pending":
		return false
	}
	return true
}

// Summary is a run's result.
type Summary struct {
	Specs   []Spec        // the specs that ran or were skipped at run time, by name
	Elapsed time.Duration // wall time of the run
}

// Count returns how many specs are in each state.
func (s Summary) Count() (passed, failed, skipped int) {
	for _, sp := range s.Specs {
		switch {
		case sp.State == "passed":
			passed++
		case sp.Failed():
			failed++
		default:
			skipped++
		}
	}
	return passed, failed, skipped
}

// Line is the one-line result: "N passed, N failed".
func (s Summary) Line() string {
	p, f, sk := s.Count()
	line := fmt.Sprintf("%d passed, %d failed", p, f)
	if sk > 0 {
		line += fmt.Sprintf(" (%d skipped at run time)", sk)
	}
	return line
}

// report is the part of ginkgo's JSON report read here.
type report []struct {
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeText            string
		LeafNodeType            string
		State                   string
		RunTime                 int64
		Failure                 *struct{ Message string }
	}
}

// ReadReport reads a ginkgo JSON report and keeps the specs (not the suite's
// setup nodes) that the filters let through; a spec skipped at run time has
// its reason as its failure, a filtered one none.
func ReadReport(path string) (Summary, error) {
	data, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return Summary{}, fmt.Errorf("read report: %w", err)
	}
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		return Summary{}, fmt.Errorf("parse report %s: %w", path, err)
	}
	var s Summary
	for _, suite := range r {
		for _, sr := range suite.SpecReports {
			if sr.LeafNodeType != "It" || (sr.State == "skipped" && sr.Failure == nil) {
				continue // a setup node, or a spec the focus and skip filtered out
			}
			sp := Spec{Name: strings.Join(append(append([]string{}, sr.ContainerHierarchyTexts...), sr.LeafNodeText), " "),
				State: sr.State, RunTime: time.Duration(sr.RunTime)}
			if sr.Failure != nil && sp.Failed() {
				sp.Failure = sr.Failure.Message
			}
			s.Specs = append(s.Specs, sp)
		}
	}
	sort.Slice(s.Specs, func(i, j int) bool { return s.Specs[i].Name < s.Specs[j].Name })
	return s, nil
}

// Print writes one line per spec that ran (state, seconds, name), the failure
// of each failed spec, and the summary line.
func (s Summary) Print(w io.Writer) {
	for _, sp := range s.Specs {
		if sp.State == "skipped" {
			continue
		}
		_, _ = fmt.Fprintf(w, "%-8s %6.1fs  %s\n", sp.State, sp.RunTime.Seconds(), sp.Name)
		if sp.Failed() {
			_, _ = fmt.Fprintf(w, "         %s\n", firstLines(sp.Failure, 6))
		}
	}
	_, _ = fmt.Fprintf(w, "\n%s in %s\n", s.Line(), s.Elapsed.Round(time.Second))
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n         ")
}
