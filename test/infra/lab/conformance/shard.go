package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// ExactFocus is a focus that matches exactly the specs named (full texts).
// Ginkgo matches a focus against the suite's description, a space and the
// spec's full text, so the name is anchored at that space and the end.
func ExactFocus(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "(^| )(" + strings.Join(q, "|") + ")$"
}

// Missing is the state of a spec a run was to run and did not.
const Missing = "missing"

// Expect adds to s, as Missing, each spec named that s does not hold: one the
// run was given and that no e2e.test process ran. Missing counts as failed.
func (s *Summary) Expect(names []string) {
	have := make(map[string]bool, len(s.Specs))
	for _, sp := range s.Specs {
		have[sp.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			s.Specs = append(s.Specs, Spec{Name: n, State: Missing, Failure: "did not run: no spec of this name matched its focus"})
		}
	}
	sort.Slice(s.Specs, func(i, j int) bool { return s.Specs[i].Name < s.Specs[j].Name })
}

// Shard deals names out to n shards in turn (fewer when there are fewer names).
func Shard(names []string, n int) [][]string {
	n = min(n, len(names))
	if n < 1 {
		return nil
	}
	shards := make([][]string, n)
	for i, name := range names {
		shards[i%n] = append(shards[i%n], name)
	}
	return shards
}

// ShardDir is where shard i (from 1) of a sharded run in dir writes its
// report, e2e.test's files and its output (e2e.log).
func ShardDir(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("shard-%d", i)) }

// RunSharded runs the specs named (full texts, as List returns them) in up to
// n e2e.test processes at once, each with its share as an exact focus (o.Focus
// and o.Skip are not used), and merges their reports into
// ReportFile(o.ReportDir). It suits specs that may run alongside each other:
// not [Serial], each in namespaces of its own. Each shard's output goes to
// e2e.log in its ShardDir; o.Output gets one line per shard. A spec named
// that did not run is in the summary as Missing.
func RunSharded(ctx context.Context, o Options, names []string, n int) (Summary, error) {
	shards := Shard(names, n)
	if len(shards) == 0 {
		return Summary{}, errors.New("no specs to run")
	}
	start := time.Now()
	results := make([]Summary, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, shard := range shards {
		so := o
		so.ReportDir, so.Focus, so.Skip = ShardDir(o.ReportDir, i+1), ExactFocus(shard), ""
		if err := os.MkdirAll(so.ReportDir, 0o750); err != nil {
			return Summary{}, fmt.Errorf("shard %d: %w", i+1, err)
		}
		logPath := filepath.Join(so.ReportDir, "e2e.log")
		log, err := os.Create(filepath.Clean(logPath))
		if err != nil {
			return Summary{}, fmt.Errorf("shard %d: %w", i+1, err)
		}
		so.Output = log
		if o.Output != nil {
			_, _ = fmt.Fprintf(o.Output, "shard %d: %d specs, output in %s\n", i+1, len(shard), logPath)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = log.Close() }()
			results[i], errs[i] = Run(ctx, so)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("shard %d: %w", i+1, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Summary{}, err
	}
	if err := mergeReports(ReportFile(o.ReportDir), len(shards), o.ReportDir); err != nil {
		return Summary{}, err
	}
	var s Summary
	for _, r := range results {
		s.Specs = append(s.Specs, r.Specs...)
	}
	s.Expect(names)
	s.Elapsed = time.Since(start)
	return s, nil
}

// mergeReports writes to path one ginkgo JSON report holding the suite
// reports of the n shards of dir.
func mergeReports(path string, n int, dir string) error {
	var all []json.RawMessage
	for i := 1; i <= n; i++ {
		data, err := os.ReadFile(filepath.Clean(ReportFile(ShardDir(dir, i))))
		if err != nil {
			return fmt.Errorf("merge reports: %w", err)
		}
		var suites []json.RawMessage
		if err := json.Unmarshal(data, &suites); err != nil {
			return fmt.Errorf("merge reports: shard %d: %w", i, err)
		}
		all = append(all, suites...)
	}
	data, err := json.Marshal(all)
	if err != nil {
		return fmt.Errorf("merge reports: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("merge reports: %w", err)
	}
	return nil
}
