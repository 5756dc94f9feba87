package conformance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestShardAndExactFocus(t *testing.T) {
	names := []string{"a [x]", "b (y)", "c", "d", "e"}
	shards := Shard(names, 2)
	if len(shards) != 2 || strings.Join(shards[0], ",") != "a [x],c,e" || strings.Join(shards[1], ",") != "b (y),d" {
		t.Errorf("Shard(5 names, 2) = %q", shards)
	}
	if got := Shard(names[:1], 3); len(got) != 1 {
		t.Errorf("Shard(1 name, 3) = %q; want one shard", got)
	}
	if got := Shard(nil, 2); got != nil {
		t.Errorf("Shard(nil) = %q", got)
	}
	focus := regexp.MustCompile(ExactFocus(shards[1]))
	// ginkgo matches "<suite description> <spec text>"
	for n, want := range map[string]bool{"b (y)": true, "d": true, "a [x]": false, "dd": false, "b (y) more": false, "xd": false} {
		if focus.MatchString("Kubernetes e2e suite "+n) != want {
			t.Errorf("ExactFocus(%q) matches %q = %v; want %v", shards[1], n, !want, want)
		}
	}
}

// TestRunSharded runs two shards of a stand-in e2e.test whose report names
// one spec after the focus it was given and passes it.
func TestRunSharded(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "e2e.test")
	script := `#!/bin/sh
for a; do case "$a" in --ginkgo.json-report=*) r=${a#*=};; --ginkgo.focus=*) f=${a#*=};; --ginkgo.skip=*) exit 4;; esac; done
echo "running $f"
printf '[{"SpecReports":[{"ContainerHierarchyTexts":["s"],"LeafNodeText":"%s","LeafNodeType":"It","State":"passed"}]}]' "$f" > "$r"
`
	if err := os.WriteFile(fake, []byte(script), 0o700); err != nil { //nolint:gosec // G306: an executable stand-in
		t.Fatal(err)
	}
	var out strings.Builder
	o := Options{E2ETest: fake, ReportDir: filepath.Join(dir, "r"), Skip: "ignored", Output: &out}
	s, err := RunSharded(context.Background(), o, []string{"one", "two", "three"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The stand-in ran specs named after their focus, so the three named
	// are missing.
	states := map[string]string{}
	for _, sp := range s.Specs {
		states[sp.Name] = sp.State
	}
	want := map[string]string{"one": Missing, "two": Missing, "three": Missing, "s (^| )(one|three)$": "passed", "s (^| )(two)$": "passed"}
	if len(states) != len(want) || len(s.Specs) != len(want) {
		t.Errorf("specs = %+v", s.Specs)
	}
	for n, st := range want {
		if states[n] != st {
			t.Errorf("%q: state %q; want %q", n, states[n], st)
		}
	}
	if p, f, _ := s.Count(); p != 2 || f != 3 {
		t.Errorf("Count = %d passed, %d failed; want 2, 3 (the missing ones)", p, f)
	}
	if !strings.Contains(out.String(), "shard 2: 1 specs, output in "+filepath.Join(ShardDir(o.ReportDir, 2), "e2e.log")) {
		t.Errorf("output:\n%s", out.String())
	}
	if log, err := os.ReadFile(filepath.Join(ShardDir(o.ReportDir, 1), "e2e.log")); err != nil || !strings.Contains(string(log), "running (^| )(one|three)$") {
		t.Errorf("shard 1 log: %q, %v", log, err)
	}
	merged, err := ReadReport(ReportFile(o.ReportDir))
	if err != nil || len(merged.Specs) != 2 {
		t.Errorf("merged report: %+v, %v", merged, err)
	}
	if _, err := RunSharded(context.Background(), o, nil, 2); err == nil {
		t.Error("RunSharded of no specs: no error")
	}
	o.E2ETest = filepath.Join(dir, "missing")
	if _, err := RunSharded(context.Background(), o, []string{"one"}, 2); err == nil {
		t.Error("RunSharded with no e2e.test: no error")
	}
}
