package lab

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The install guide as a script: `up --bootstrap kubeadm` runs the commands of
// docs/install.md's kubeadm section itself, so the guide cannot drift from
// what works. A fenced sh block that the lab runs is preceded by a marker
// line naming its step:
//
//	<!-- lab-runs: estuary-install -->
//
// The blocks use only the variables the guide asks the reader to set first
// (InstallDocVars); the lab sets them to its own values and runs the block as
// written.

// InstallDocPath is the install guide, relative to the checkout.
const InstallDocPath = "docs/install.md"

// The steps of the kubeadm section the lab runs, in order.
const (
	DocKubeadmInit    = "kubeadm-init"    // one kubeadm init command
	DocKubeadmJoin    = "kubeadm-join"    // one kubeadm join command
	DocEstuaryInstall = "estuary-install" // a shell script
	DocEstuaryCheck   = "estuary-check"   // a shell script
	DocFirstPod       = "first-pod"       // a shell script
)

// DocInstallSteps are the guide's steps after the cluster is made, in the
// order the lab runs them.
var DocInstallSteps = []string{DocEstuaryInstall, DocEstuaryCheck, DocFirstPod}

// InstallDocVars are the variables the guide's blocks may use.
var InstallDocVars = []string{"POD_CIDR", "REGISTRY", "VERSION", "HELM_FLAGS",
	"CONTROL_PLANE", "TOKEN", "CA_CERT_HASH"}

var docMarker = regexp.MustCompile(`^\s*<!--\s*lab-runs:\s*([a-z0-9-]+)\s*-->\s*$`)

// InstallDoc holds the marked blocks of the install guide by step name.
type InstallDoc map[string]string

// ReadInstallDoc parses the guide in the checkout at repo.
func ReadInstallDoc(repo string) (InstallDoc, error) {
	p := filepath.Join(repo, InstallDocPath)
	b, err := os.ReadFile(filepath.Clean(p))
	if err != nil {
		return nil, fmt.Errorf("read the install guide: %w", err)
	}
	d, err := ParseInstallDoc(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	for _, step := range append([]string{DocKubeadmInit, DocKubeadmJoin}, DocInstallSteps...) {
		if d[step] == "" {
			return nil, fmt.Errorf("%s: no block marked <!-- lab-runs: %s -->", p, step)
		}
	}
	return d, nil
}

// ParseInstallDoc returns the fenced block after each marker, its common
// indentation removed. A marker not followed by a fenced block, a step marked
// twice, or a block using a variable outside InstallDocVars is an error.
func ParseInstallDoc(text string) (InstallDoc, error) {
	d := InstallDoc{}
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		m := docMarker.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		step := m[1]
		if _, dup := d[step]; dup {
			return nil, fmt.Errorf("line %d: step %s marked twice", line, step)
		}
		block, n, err := fencedBlock(sc)
		if err != nil {
			return nil, fmt.Errorf("line %d: step %s: %w", line, step, err)
		}
		line += n
		if err := checkDocVars(block); err != nil {
			return nil, fmt.Errorf("line %d: step %s: %w", line, step, err)
		}
		d[step] = block
	}
	return d, sc.Err()
}

// fencedBlock reads blank lines up to an opening ``` line and returns the
// block's body, dedented, and the number of lines read.
func fencedBlock(sc *bufio.Scanner) (string, int, error) {
	n := 0
	indent := ""
	for {
		if !sc.Scan() {
			return "", n, fmt.Errorf("no fenced block after the marker")
		}
		n++
		t := sc.Text()
		if strings.TrimSpace(t) == "" {
			continue
		}
		trim := strings.TrimLeft(t, " ")
		if !strings.HasPrefix(trim, "```") {
			return "", n, fmt.Errorf("the marker is followed by %q, not a fenced block", t)
		}
		indent = t[:len(t)-len(trim)]
		break
	}
	var body []string
	for sc.Scan() {
		n++
		t := sc.Text()
		if strings.TrimSpace(t) == "```" {
			return strings.Join(body, "\n") + "\n", n, nil
		}
		body = append(body, strings.TrimPrefix(t, indent))
	}
	return "", n, fmt.Errorf("fenced block not closed")
}

var docVarRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

func checkDocVars(block string) error {
	for _, m := range docVarRef.FindAllStringSubmatch(block, -1) {
		known := false
		for _, v := range InstallDocVars {
			known = known || m[1] == v
		}
		if !known {
			return fmt.Errorf("variable %s is not one the guide asks the reader to set (%s)", m[1], strings.Join(InstallDocVars, ", "))
		}
	}
	return nil
}

// Command expands a one-command step (kubeadm init or join) with vars and
// returns its words: the step must be one line of plain words, starting with
// want.
func (d InstallDoc) Command(step, want string, vars map[string]string) ([]string, error) {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(d[step]), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		return nil, fmt.Errorf("step %s: want one command line, have %d", step, len(lines))
	}
	if strings.ContainsAny(lines[0], `'"\|;&<>`+"`") {
		return nil, fmt.Errorf("step %s: %q is not a plain command", step, lines[0])
	}
	expanded := os.Expand(lines[0], func(k string) string { return vars[k] })
	words := strings.Fields(expanded)
	if len(words) == 0 || words[0] != want {
		return nil, fmt.Errorf("step %s: %q does not run %s", step, lines[0], want)
	}
	return words, nil
}
