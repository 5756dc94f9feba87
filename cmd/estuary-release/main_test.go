package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/estuary-cni/estuary/internal/release"
)

// gitRepo returns a repository with one commit of a.txt and the commit.
func gitRepo(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	writeFile(t, filepath.Join(dir, "a.txt"), "a")
	run("add", "a.txt")
	run("commit", "-q", "-m", "a")
	return dir, run("rev-parse", "HEAD")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSourceRefusesDirtyTree: a checkout with a changed and an untracked
// file is refused, naming both and --allow-dirty; with the flag it is
// released labelled <commit>-dirty; a clean one is released as its commit.
func TestSourceRefusesDirtyTree(t *testing.T) {
	repo, commit := gitRepo(t)
	var stderr bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetErr(&stderr)

	o := release.Options{Repo: repo}
	if err := source(cmd, &o, false); err != nil || o.Commit != commit || o.Created.IsZero() {
		t.Fatalf("clean tree: commit %q created %v err %v, want %s", o.Commit, o.Created, err, commit)
	}

	writeFile(t, filepath.Join(repo, "a.txt"), "changed")
	writeFile(t, filepath.Join(repo, "new.txt"), "new")
	o = release.Options{Repo: repo}
	err := source(cmd, &o, false)
	if err == nil {
		t.Fatal("dirty tree released without --allow-dirty")
	}
	for _, want := range []string{"a.txt", "new.txt", "--allow-dirty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}

	o = release.Options{Repo: repo}
	if err := source(cmd, &o, true); err != nil {
		t.Fatalf("--allow-dirty: %v", err)
	}
	if o.Commit != commit+"-dirty" {
		t.Errorf("--allow-dirty labelled the release %q, want %s-dirty", o.Commit, commit)
	}
	if !strings.Contains(stderr.String(), "a.txt") {
		t.Errorf("no warning naming the changes on stderr: %q", stderr.String())
	}
}

func TestChangedFilesNamesTheFirstFew(t *testing.T) {
	var lines []string
	for i := range 7 {
		lines = append(lines, fmt.Sprintf(" M f%d.go", i))
	}
	got := changedFiles(strings.Join(lines, "\n"))
	if want := "f0.go, f1.go, f2.go, f3.go, f4.go and 2 more"; got != want {
		t.Errorf("changedFiles = %q, want %q", got, want)
	}
}
