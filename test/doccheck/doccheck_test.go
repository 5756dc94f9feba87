package doccheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// root is the checkout, two folders up from this package.
const root = "../.."

// The backticked text that is a citation, by kind. Text that is none of
// these is not checked; so is a path of a past commit, written as git
// names it (`8536872:internal/x/y.go:77`, a profile of that commit).
var (
	// a path in the checkout: `internal/x/y.go`, `charts/estuary`,
	// `internal/dataplane/**`, `templates/metrics*.yaml`; it may end in a
	// package's identifier (`internal/daemon.Run`) or name a test of the
	// file (`internal/x/y_test.go:TestZ`) or a line of it
	// (`internal/x/y.go:20`, a profile's: only the file is checked).
	pathCite = regexp.MustCompile(`^(api|charts|cmd|config|docs|hack|internal|pkg|test)/[\w./*-]*(:\w+)?$`)
	// a Go identifier qualified by its package's name: `netmodel.Defaults`,
	// `cniserver.Server.Busy`, `translate.Policy(...)`.
	goCite = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Za-z]\w*))?(?:\(.*\))?$`)
	// a test, benchmark or fuzz target: `TestOverlayTwoNodes`.
	testCite = regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z]\w*$`)
	// a Go file by its name alone: `audit.go` (other names are as often a
	// command's output as a file of the checkout).
	fileCite = regexp.MustCompile(`^[a-z][\w-]*\.go$`)
	// a line number after a path citation's colon.
	isLine = regexp.MustCompile(`^[0-9]+$`)
	// the identifier at the end of a path citation.
	pathIdent = regexp.MustCompile(`^(.+?)\.([A-Z]\w*(?:\.\w+)?)$`)
)

// foreign are qualifiers the docs use that are not estuary's packages: the
// standard library, Kubernetes' and apiserver's packages by their usual
// import names, and a benchmark's variables.
var foreign = map[string]bool{
	"runtime": true, "strconv": true, "corev1": true, "apimeta": true, "filters": true, "types": true,
	"b": true, "fx": true, "v0": true,
}

// elsewhere are path citations of other projects' trees.
var elsewhere = map[string]bool{
	"test/e2e/network/netpol": true, // kubernetes/kubernetes: the Netpol suite of e2e.test
}

// docs are the Markdown files whose citations are checked.
func docs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/*.md: %v (found %d)", err, len(files))
	}
	return append(files, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"))
}

// TestDocsCiteWhatExists: every path, Go identifier, test and file name a
// doc cites in backticks (outside fenced code blocks) exists in the
// checkout.
func TestDocsCiteWhatExists(t *testing.T) {
	ix, err := loadIndex()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs(t) {
		name, _ := filepath.Rel(root, doc)
		t.Run(name, func(t *testing.T) {
			cites, err := citations(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cites {
				if problem := ix.check(c.text); problem != "" {
					t.Errorf("%s:%d: `%s`: %s", name, c.line, c.text, problem)
				}
			}
		})
	}
}

// A citation is backticked text and the line it is on.
type citation struct {
	text string
	line int
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// citations returns the backticked spans of the Markdown file outside
// fenced code blocks.
func citations(file string) ([]citation, error) {
	f, err := os.Open(filepath.Clean(file))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	defer func() { _ = f.Close() }()
	var out []citation
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
			out = append(out, citation{text: strings.TrimSpace(m[1]), line: n})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return out, nil
}

// index is what the checkout holds: file names, and the Go declarations
// of each package directory and package name.
type index struct {
	baseNames map[string]bool
	tests     map[string]bool            // Test, Benchmark and Fuzz functions
	byDir     map[string]map[string]bool // package directory: declared names
	byName    map[string]map[string]bool // package name: declared names
}

// loadIndex reads the checkout once.
var loadIndex = sync.OnceValues(func() (*index, error) {
	ix := &index{baseNames: map[string]bool{}, tests: map[string]bool{},
		byDir: map[string]map[string]bool{}, byName: map[string]map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "bin" || n == "_output" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		ix.baseNames[d.Name()] = true
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", p, err)
		}
		ix.add(filepath.Dir(p), f, strings.HasSuffix(p, "_test.go"))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index the checkout: %w", err)
	}
	return ix, nil
})

// add records the declarations of f, a file of the package in dir.
func (ix *index) add(dir string, f *ast.File, isTest bool) {
	rel, _ := filepath.Rel(root, dir)
	names := func(m map[string]map[string]bool, k string) map[string]bool {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		return m[k]
	}
	for _, set := range []map[string]bool{names(ix.byDir, filepath.ToSlash(rel)), names(ix.byName, strings.TrimSuffix(f.Name.Name, "_test"))} {
		for _, n := range declared(f) {
			set[n] = true
		}
	}
	if !isTest {
		return
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && testCite.MatchString(fn.Name.Name) {
			ix.tests[fn.Name.Name] = true
		}
	}
}

// declared lists f's top-level names, and its methods, struct fields and
// interface methods as Type.Name.
func declared(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				out = append(out, d.Name.Name)
				continue
			}
			out = append(out, receiverName(d.Recv.List[0].Type)+"."+d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out = append(out, s.Name.Name)
					out = append(out, members(s.Name.Name, s.Type)...)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

// receiverName is the type a method's receiver names: T of T, *T, T[K].
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// members are a struct's fields or an interface's methods, as Type.Name.
func members(typ string, e ast.Expr) []string {
	var list *ast.FieldList
	switch e := e.(type) {
	case *ast.StructType:
		list = e.Fields
	case *ast.InterfaceType:
		list = e.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range list.List {
		for _, n := range f.Names {
			out = append(out, typ+"."+n.Name)
		}
		if len(f.Names) == 0 { // embedded: named by its type
			if n := receiverName(f.Type); n != "" {
				out = append(out, typ+"."+n)
			}
		}
	}
	return out
}

// check says what is wrong with a citation; "" when it exists or is no
// citation.
func (ix *index) check(text string) string {
	switch {
	case elsewhere[text]:
		return ""
	case pathCite.MatchString(text):
		return ix.checkPath(text)
	case goCite.MatchString(text):
		m := goCite.FindStringSubmatch(text)
		if foreign[m[1]] {
			return ""
		}
		names, ok := ix.byName[m[1]]
		if !ok {
			return fmt.Sprintf("no package is named %s", m[1])
		}
		return missing(names, m[1], m[2], m[3])
	case testCite.MatchString(text):
		if !ix.tests[text] {
			return "no test, benchmark or fuzz target of this name"
		}
	case fileCite.MatchString(text):
		if !ix.baseNames[text] {
			return "no file of this name in the checkout"
		}
	}
	return ""
}

// checkPath checks a path citation, with its identifier or test if it
// names one.
func (ix *index) checkPath(text string) string {
	p, test, _ := strings.Cut(text, ":")
	if m := pathIdent.FindStringSubmatch(p); m != nil && isDir(m[1]) {
		typ, member, _ := strings.Cut(m[2], ".")
		return missing(ix.byDir[m[1]], m[1], typ, member)
	}
	p = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(p, "/..."), "/**"), "/")
	matches, err := filepath.Glob(filepath.Join(root, p))
	if err != nil || len(matches) == 0 {
		return "no such file or directory"
	}
	names := ix.byDir[filepath.ToSlash(filepath.Dir(p))]
	if test != "" && !isLine.MatchString(test) && !names[test] {
		return fmt.Sprintf("%s declares no %s", filepath.Dir(p), test)
	}
	return ""
}

func isDir(rel string) bool {
	st, err := os.Stat(filepath.Join(root, rel))
	return err == nil && st.IsDir()
}

// missing says which of typ and typ.member the package (names) does not
// declare; "" if it declares both.
func missing(names map[string]bool, pkg, typ, member string) string {
	if !names[typ] {
		return fmt.Sprintf("%s declares no %s", pkg, typ)
	}
	if member != "" && !names[typ+"."+member] {
		return fmt.Sprintf("%s.%s has no %s", pkg, typ, member)
	}
	return ""
}

// TestCheckRefusesWhatIsGone: the check refuses a missing path, package,
// identifier, member, test and Go file, and passes what exists.
func TestCheckRefusesWhatIsGone(t *testing.T) {
	ix, err := loadIndex()
	if err != nil {
		t.Fatal(err)
	}
	for text, gone := range map[string]bool{
		"internal/cniplugins/cniplugins.go":                          false,
		"internal/cniplugins":                                        false,
		"internal/cniplugins.Packages":                               false,
		"cniplugins.Version":                                         false,
		"test/doccheck/doccheck_test.go:TestDocsCiteWhatExists":      false,
		"test/doccheck/doccheck_test.go:12":                          false,
		"TestDocsCiteWhatExists":                                     false,
		"doccheck_test.go":                                           false,
		"runtime.GC":                                                 false,
		"internal/cniplugins/nosuch.go":                              true,
		"internal/cniplugins.NoSuch":                                 true,
		"cniplugins.NoSuch":                                          true,
		"nosuchpkg.Thing":                                            true,
		"cniplugins.Packages.NoSuch":                                 true,
		"test/doccheck/doccheck_test.go:TestNoSuch":                  true,
		"TestNoSuchTestAnywhere":                                     true,
		"nosuchfile.go":                                              true,
		"8536872:internal/dataplane/ops/parent.go:77 is of a commit": false,
	} {
		if p := ix.check(text); (p != "") != gone {
			t.Errorf("check(`%s`) = %q, want refused %v", text, p, gone)
		}
	}
}
