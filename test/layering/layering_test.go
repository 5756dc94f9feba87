package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// A layer is a set of rooms: a package belongs to the layer of the longest
// pattern that is its path or a folder above it (relative to the module).
type layer struct {
	name  string
	rooms []string
}

// layers are the product's layers, lowest first. A package may import
// packages of its own layer and of the layers below it, never above.
var layers = []layer{
	// The API types, the CNI and endpoint wire formats, the CRDs and the
	// address arithmetic every other room speaks.
	{"objects", []string{"api", "pkg", "config"}},
	// Tools that know no room of estuary: the version, API clients and
	// their gates, memory limit, redaction, namespaces, sysctls,
	// re-subscription, serving certificates, start and stop, the pinned
	// CNI plugins, the fault hooks, the policy's drop records and the
	// node report's format.
	{"kit", []string{"internal/version", "internal/kubeclient", "internal/clientgates", "internal/memlimit",
		"internal/redact", "internal/nsrun", "internal/sysctl", "internal/resubscribe", "internal/servingcert",
		"internal/lifecycle", "internal/cniplugins", "internal/faultinject", "internal/policydrops", "internal/nodereport"}},
	// estuary's reading of its objects, shared by the manager and the node:
	// networks, workloads, endpoint records, BGP peer status, allocation
	// checks.
	{"model", []string{"internal/netmodel", "internal/uplink", "internal/workload", "internal/endpointstore", "internal/bgpstatus",
		"internal/ipamcheck"}},
	// The node's kernel state: written from plain values (dataplane), read
	// back whole (nodesnap).
	{"kernel", []string{"internal/dataplane", "internal/nodesnap"}},
	// The policy objects read into the kernel's policy model: what a node
	// enforces, and what of an object no node can enforce as written. The
	// node enforces it and the manager reports it; the manager reaches the
	// kernel's model only through this room (walls judge direct imports).
	{"policy", []string{"internal/policytranslate"}},
	// The CNI server and the backend that answers its calls.
	{"cni", []string{"internal/cniserver", "internal/cnibackend"}},
	// The node daemon: the data-path loop, BGP, policy and the wiring of
	// the node's rooms.
	{"node", []string{"internal/daemon"}},
	// The cluster-wide controllers, the admission webhook, the manager's
	// start-up work and its wiring. Beside the node, not above it: see
	// walls.
	{"manager", []string{"internal/controller", "internal/webhook", "internal/bootstrap", "internal/crdupgrade",
		"internal/daemonsetmetrics", "internal/metricscert", "internal/migrate", "internal/uninstall",
		"internal/manager"}},
	// The bodies of the kubectl plugin and of the release, which read
	// both sides.
	{"tools", []string{"internal/cli", "internal/release"}},
	// Main packages: flags into a room's Run.
	{"commands", []string{"cmd"}},
}

// A wall forbids imports from some rooms into others whatever their layers.
type wall struct {
	why      string
	from, to []string
}

// walls: the manager's rooms sit above the node's in the layer order only
// so that the order is one line; neither side imports the other.
var walls = []wall{{
	why:  "the manager does not import the node's rooms",
	from: []string{"internal/controller", "internal/webhook", "internal/bootstrap", "internal/crdupgrade", "internal/daemonsetmetrics", "internal/metricscert", "internal/migrate", "internal/uninstall", "internal/manager"},
	to:   []string{"internal/daemon", "internal/cniserver", "internal/cnibackend", "internal/dataplane", "internal/nodesnap"},
}}

// notProduct are the folders that ship in no release: tests, their
// infrastructure and the hack scripts' programs. labTools are commands that
// drive the lab and so may import test infrastructure.
var (
	notProduct = []string{"test", "hack"}
	labTools   = []string{"cmd/estuary-lab", "cmd/estuary-scale"}
)

// exceptions are imports (importer, imported package) that the layers or
// walls refuse and that are known; each must still exist, so the list only
// shrinks.
var exceptions = map[[2]string]string{}

// graph is the module's import graph: package to the module's packages it
// imports (non-test files), paths relative to the module.
type graph map[string][]string

// buildTags are the tag sets the graph is the union of: a default build,
// and one with every tag the tree uses.
var buildTags = []string{"", "faultinject,lab,integration"}

// moduleGraph is the graph, read once for every test.
var moduleGraph = sync.OnceValues(func() (graph, error) {
	g := graph{}
	for _, tags := range buildTags {
		if err := addPackages(g, tags); err != nil {
			return nil, err
		}
	}
	if len(g) == 0 {
		return nil, errors.New("go list found no package")
	}
	return g, nil
})

func loadGraph(t *testing.T) graph {
	t.Helper()
	g, err := moduleGraph()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// addPackages adds `go list -json ./...` (built with tags) to g.
func addPackages(g graph, tags string) error {
	prefix, err := modulePrefix()
	if err != nil {
		return err
	}
	out, err := goCmd("list", "-e", "-json=ImportPath,Imports", "-tags", tags, "./...")
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("decode go list -tags %q: %w", tags, err)
		}
		from := strings.TrimPrefix(p.ImportPath, prefix)
		for _, imp := range p.Imports {
			if to, ok := strings.CutPrefix(imp, prefix); ok && !slices.Contains(g[from], to) {
				g[from] = append(g[from], to)
			}
		}
		if _, ok := g[from]; !ok {
			g[from] = nil
		}
	}
}

// modulePrefix is the module's path and a slash.
func modulePrefix() (string, error) {
	mod, err := goCmd("list", "-m")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(mod)) + "/", nil
}

// goCmd runs the go tool at the module's root (two folders up).
func goCmd(args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// under reports whether pkg is one of the folders or below one.
func under(pkg string, folders []string) bool {
	for _, f := range folders {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return true
		}
	}
	return false
}

func isProduct(pkg string) bool { return !under(pkg, notProduct) }

// TestProductImportsNoTestInfrastructure: no package that ships (outside
// test/ and hack/, the lab's commands aside) imports a package under test/.
func TestProductImportsNoTestInfrastructure(t *testing.T) {
	g := loadGraph(t)
	for _, from := range sortedKeys(g) {
		if !isProduct(from) || under(from, labTools) {
			continue
		}
		for _, to := range g[from] {
			if under(to, []string{"test"}) {
				t.Errorf("%s imports test infrastructure %s", from, to)
			}
		}
	}
}

// releaseCommands are the commands a release ships (internal/release).
var releaseCommands = []string{"./cmd/estuary-manager", "./cmd/estuary-daemon", "./cmd/estuary-cni",
	"./cmd/kubectl-estuary", "./cmd/estuary-release"}

// TestReleaseBuildsLinkNoTestCode: built as a release builds them (no
// tags), the shipped commands link no package under test/ and not the
// fault hooks, which only a faultinject build (the lab's) carries.
func TestReleaseBuildsLinkNoTestCode(t *testing.T) {
	out, err := goCmd(append([]string{"list", "-e", "-deps"}, releaseCommands...)...)
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := modulePrefix()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(dep, prefix)
		if ok && under(rel, []string{"test", "internal/faultinject"}) {
			t.Errorf("a release build links %s", rel)
		}
	}
}

// nodeOnly are the packages that work a node's kernel (netlink, nftables,
// network and mount namespaces): Linux's, and the daemon's and CNI
// binary's to link, not the kubectl plugin's.
var nodeOnly = []string{"github.com/estuary-cni/estuary/internal/dataplane/ops", "github.com/estuary-cni/estuary/internal/nsrun",
	"github.com/estuary-cni/estuary/internal/nodesnap", "github.com/vishvananda/netlink", "github.com/vishvananda/netns",
	"github.com/google/nftables", "github.com/mdlayher/netlink", "github.com/containernetworking/plugins/pkg/ns"}

// TestPluginLinksNoNodeCode: the kubectl plugin, released for Linux and
// macOS, links none of the node's kernel code, on Linux either; what it
// shares with the daemon (the policy compiler, the node report's format)
// is pure Go. `make lint` also cross-builds it for darwin/arm64.
func TestPluginLinksNoNodeCode(t *testing.T) {
	out, err := goCmd("list", "-deps", "./cmd/kubectl-estuary")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if under(dep, nodeOnly) {
			t.Errorf("kubectl-estuary links node code %s", dep)
		}
	}
}

// TestNoFoldersImportEachOtherInACircle: under every folder, the package
// in it and its subfolders (each with everything below it) import each
// other without a circle: no room imports a room that imports it back,
// however many packages apart.
func TestNoFoldersImportEachOtherInACircle(t *testing.T) {
	for _, c := range folderCircles(loadGraph(t)) {
		t.Errorf("under %q, these import each other in a circle: %s", c.folder, strings.Join(c.edges, "; "))
	}
}

// TestRoomsImportOnlyTheirLayerOrBelow: every product package is in a
// layer, imports nothing of a higher layer and nothing a wall forbids,
// but for the listed exceptions, each of which still exists.
func TestRoomsImportOnlyTheirLayerOrBelow(t *testing.T) {
	g := loadGraph(t)
	used := map[[2]string]bool{}
	for _, from := range sortedKeys(g) {
		if !isProduct(from) {
			continue
		}
		lf, ok := layerOf(from)
		if !ok {
			t.Errorf("%s is in no layer: add its room to layers in this file", from)
			continue
		}
		for _, to := range g[from] {
			problem := importProblem(from, lf, to)
			if problem == "" {
				continue
			}
			if _, known := exceptions[[2]string{from, to}]; known {
				used[[2]string{from, to}] = true
				continue
			}
			t.Errorf("%s imports %s: %s", from, to, problem)
		}
	}
	for _, room := range declaredRooms() {
		if !slices.ContainsFunc(sortedKeys(g), func(p string) bool { return under(p, []string{room}) }) {
			t.Errorf("room %s is declared in layers or walls but holds no package: remove it", room)
		}
	}
	for e, why := range exceptions {
		if !used[e] {
			t.Errorf("exception %s -> %s (%s) no longer happens: remove it from exceptions", e[0], e[1], why)
		}
	}
}

// declaredRooms are the rooms layers and walls name.
func declaredRooms() []string {
	var out []string
	for _, l := range layers {
		out = append(out, l.rooms...)
	}
	for _, w := range walls {
		out = append(out, w.from...)
		out = append(out, w.to...)
	}
	return out
}

// importProblem says why from (in layer lf) may not import to; "" if it may.
func importProblem(from string, lf int, to string) string {
	if !isProduct(to) {
		return ""
	}
	lt, ok := layerOf(to)
	if ok && lt > lf {
		return fmt.Sprintf("layer %q imports layer %q above it", layers[lf].name, layers[lt].name)
	}
	for _, w := range walls {
		if under(from, w.from) && under(to, w.to) {
			return w.why
		}
	}
	return ""
}

// layerOf is the index of pkg's layer: the one with the longest pattern
// that is pkg or a folder above it.
func layerOf(pkg string) (int, bool) {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, r := range l.rooms {
			if under(pkg, []string{r}) && len(r) > bestLen {
				best, bestLen = i, len(r)
			}
		}
	}
	return best, best >= 0
}

// circle is a strongly connected set of siblings under folder: the package
// edges that tie it, as "a -> b".
type circle struct {
	folder string
	edges  []string
}

// folderCircles finds, under every folder, the siblings (the folder's own
// package, each subfolder with its subtree) that import each other in a
// circle.
func folderCircles(g graph) []circle {
	// sib[folder][a][b]: an example package edge from sibling a to b.
	sib := map[string]map[string]map[string]string{}
	for from, tos := range g {
		for _, to := range tos {
			folder, a, b := siblings(from, to)
			if a == b {
				continue
			}
			if sib[folder] == nil {
				sib[folder] = map[string]map[string]string{}
			}
			if sib[folder][a] == nil {
				sib[folder][a] = map[string]string{}
			}
			if _, ok := sib[folder][a][b]; !ok {
				sib[folder][a][b] = from + " -> " + to
			}
		}
	}
	var out []circle
	for _, folder := range sortedKeys(sib) {
		for _, scc := range components(sib[folder]) {
			c := circle{folder: folder}
			for _, a := range scc {
				for _, b := range sortedKeys(sib[folder][a]) {
					if slices.Contains(scc, b) {
						c.edges = append(c.edges, sib[folder][a][b])
					}
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// siblings is the deepest folder holding both from and to, and the
// siblings under it that hold each: the folder itself for its own package,
// else the subfolder on the way down.
func siblings(from, to string) (folder, a, b string) {
	fe, te := strings.Split(from, "/"), strings.Split(to, "/")
	n := 0
	for n < len(fe) && n < len(te) && fe[n] == te[n] {
		n++
	}
	folder = path.Join(fe[:n]...)
	step := func(e []string) string {
		if len(e) == n {
			return folder + " (its package)"
		}
		return path.Join(e[:n+1]...)
	}
	return folder, step(fe), step(te)
}

// components returns the strongly connected components of more than one
// node of the graph edges (Tarjan), each sorted.
func components(edges map[string]map[string]string) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(edges[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			sort.Strings(scc)
			out = append(out, scc)
		}
	}
	for _, v := range sortedKeys(edges) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
