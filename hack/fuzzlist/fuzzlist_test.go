package fuzzlist

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// excludedTags are the tags whose targets hack/fuzz.sh skips by default
// (FUZZ_EXCLUDE_TAGS): test/e2e's TestMain brings a lab cluster up.
var excludedTags = []string{"lab"}

// target is one fuzz target: how hack/fuzz.sh should treat it.
type target struct {
	verb string // "run" or "skip"
	tags string // for run: comma-separated tags, "-" for none
	file string
}

// TestFuzzScriptListsEveryTarget: the targets `hack/fuzz.sh --list` prints
// are exactly the fuzz targets go/parser finds in the module, each run with
// the tags its file's build constraint needs (and those tags do build the
// file), or skipped with a reason when the constraint is not a plain
// conjunction of tags or needs an excluded tag.
func TestFuzzScriptListsEveryTarget(t *testing.T) {
	root := moduleRoot(t)
	want := scan(t, root)
	if len(want) == 0 {
		t.Fatal("go/parser found no fuzz target in the module")
	}
	got := scriptList(t, root)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		w, g := want[k], got[k]
		switch {
		case g.verb == "":
			t.Errorf("%s (%s) is a fuzz target, but hack/fuzz.sh --list does not list it", k, w.file)
		case g.verb != w.verb || (w.verb == "run" && g.tags != w.tags):
			t.Errorf("%s (%s): hack/fuzz.sh lists %q %q, want %q %q", k, w.file, g.verb, g.tags, w.verb, w.tags)
		case g.verb == "skip" && g.tags == "":
			t.Errorf("%s: hack/fuzz.sh skips it without a reason", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("hack/fuzz.sh --list lists %s, which is no fuzz target", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if w := want[k]; w.verb == "run" && !buildsWith(t, root, w) {
			t.Errorf("%s: %s does not build with tags %q", k, w.file, w.tags)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		t.Fatal("not inside a Go module")
	}
	return filepath.Dir(mod)
}

// scriptList runs hack/fuzz.sh --list: "<dir> <name>" to its verb and its
// tags (run) or reason (skip).
func scriptList(t *testing.T, root string) map[string]target {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "fuzz.sh"), "--list")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/fuzz.sh --list: %v: %s", err, stderr.String())
	}
	got := map[string]target{}
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSpace(line), " ", 4)
		if len(f) < 4 || (f[0] != "run" && f[0] != "skip") {
			t.Fatalf("hack/fuzz.sh --list printed %q, want \"run|skip <dir> <FuzzXxx> <tags|reason>\"", line)
		}
		k := f[1] + " " + f[2]
		if _, dup := got[k]; dup {
			t.Errorf("hack/fuzz.sh --list lists %s twice", k)
		}
		got[k] = target{verb: f[0], tags: f[3]}
	}
	return got
}

// scan finds the fuzz targets of the module rooted at root, as the go tool
// would: in the *_test.go files of the directories `go test ./...` covers.
func scan(t *testing.T, root string) map[string]target {
	t.Helper()
	out := map[string]target{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return scanFile(t, path, filepath.ToSlash(rel), out)
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

func scanFile(t *testing.T, path, rel string, out map[string]target) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("parse %s: %w", rel, err)
	}
	testingName := importName(f, "testing")
	verb, tags := verdict(t, f, rel)
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || !isFuzz(fn, testingName) {
			continue
		}
		out[filepath.Dir(rel)+" "+fn.Name.Name] = target{verb: verb, tags: tags, file: rel}
	}
	return nil
}

// isFuzz reports whether fn is a function the go tool fuzzes:
// FuzzXxx(*testing.F) with Xxx not starting with a lower-case letter.
func isFuzz(fn *ast.FuncDecl, testingName string) bool {
	name := fn.Name.Name
	if fn.Recv != nil || fn.Type.TypeParams != nil || fn.Type.Results != nil || !strings.HasPrefix(name, "Fuzz") {
		return false
	}
	if r, _ := utf8.DecodeRuneInString(name[len("Fuzz"):]); r != utf8.RuneError && unicode.IsLower(r) {
		return false
	}
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) > 1 {
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && testingName != "" && pkg.Name == testingName && sel.Sel.Name == "F"
}

// importName is the name f refers to the package path by, or "".
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err != nil || p != path {
			continue
		}
		if imp.Name != nil {
			return imp.Name.Name
		}
		return filepath.Base(path)
	}
	return ""
}

// verdict is how hack/fuzz.sh must treat the targets of f: run with the
// tags of a conjunction, or skip.
func verdict(t *testing.T, f *ast.File, rel string) (verb, tags string) {
	var expr constraint.Expr
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			e, err := constraint.Parse(c.Text)
			if err != nil {
				t.Errorf("%s: %s: %v", rel, c.Text, err)
				return "skip", "unparsable build constraint"
			}
			expr = e
		}
	}
	if expr == nil {
		return "run", "-"
	}
	list, ok := conjunction(expr)
	if !ok {
		return "skip", "not a conjunction"
	}
	for _, tag := range list {
		if slices.Contains(excludedTags, tag) {
			return "skip", "excluded tag " + tag
		}
	}
	return "run", strings.Join(list, ",")
}

// conjunction lists the tags of an expression that is tags joined by &&.
func conjunction(e constraint.Expr) ([]string, bool) {
	switch e := e.(type) {
	case *constraint.TagExpr:
		return []string{e.Tag}, true
	case *constraint.AndExpr:
		x, okx := conjunction(e.X)
		y, oky := conjunction(e.Y)
		return append(x, y...), okx && oky
	}
	return nil, false
}

// buildsWith reports whether the go tool compiles w's file when run with
// w's tags (its //go:build line and its name's GOOS and GOARCH).
func buildsWith(t *testing.T, root string, w target) bool {
	t.Helper()
	ctx := build.Default
	if w.tags != "-" {
		ctx.BuildTags = strings.Split(w.tags, ",")
	}
	ok, err := ctx.MatchFile(filepath.Join(root, filepath.Dir(w.file)), filepath.Base(w.file))
	if err != nil {
		t.Errorf("%s: %v", w.file, err)
	}
	return ok
}
