package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
)

// NetworkPolicy is the focus of the NetworkPolicy run: the Netpol suite of
// e2e.test (test/e2e/network/netpol), that is every [Feature:NetworkPolicy]
// spec (TCP, UDP and SCTP truth tables over three namespaces) and the two
// Netpol API specs.
const NetworkPolicy = `\[sig-network\] Netpol`

// Exclusion is a set of specs a run leaves out, and why.
type Exclusion struct {
	Pattern string // regular expression over a spec's full text, as --ginkgo.skip takes it
	Reason  string // why these specs do not run here
	// Holds reports whether the reason is true of this machine; nil: always.
	// An exclusion whose reason does not hold leaves nothing out.
	Holds func() bool
}

// NetworkPolicyExclusions are the specs the NetworkPolicy run leaves out. It
// is the one list of them: the skip expression, what estuary-lab prints and
// the make test subset all come from it.
var NetworkPolicyExclusions = []Exclusion{
	{
		Pattern: `\[Feature:SCTPConnectivity\]`,
		Reason: "the kernel has no SCTP sockets (CONFIG_IP_SCTP unset: socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails), " +
			"so agnhost can neither serve nor connect over SCTP",
		Holds: func() bool { return !KernelHasSCTP() },
	},
}

// KernelHasSCTP reports whether this kernel opens SCTP sockets. The lab's
// nodes are network namespaces of this same kernel.
func KernelHasSCTP() bool {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_SCTP)
	if err != nil {
		return false
	}
	_ = syscall.Close(fd)
	return true
}

// Active returns the exclusions whose reason holds on this machine.
func Active(ex []Exclusion) []Exclusion {
	var out []Exclusion
	for _, e := range ex {
		if e.Holds == nil || e.Holds() {
			out = append(out, e)
		}
	}
	return out
}

// SkipExpression joins the exclusions' patterns into one --ginkgo.skip
// expression ("" for none).
func SkipExpression(ex []Exclusion) string {
	p := make([]string, len(ex))
	for i, e := range ex {
		p[i] = e.Pattern
	}
	return strings.Join(p, "|")
}

// Left is a spec a run leaves out and why.
type Left struct {
	Name, Reason string
}

// Selection is what a focus and its exclusions make of the specs of e2e.test.
type Selection struct {
	Run  []string // the specs that run
	Left []Left   // the specs the exclusions leave out, each with the first reason that matches it
}

// Select splits names (the specs a focus matches) into those that run and
// those an exclusion leaves out.
func Select(names []string, ex []Exclusion) (Selection, error) {
	type compiled struct {
		re     *regexp.Regexp
		reason string
	}
	cs := make([]compiled, 0, len(ex))
	for _, e := range ex {
		re, err := regexp.Compile(e.Pattern)
		if err != nil {
			return Selection{}, fmt.Errorf("exclusion %q: %w", e.Pattern, err)
		}
		cs = append(cs, compiled{re, e.Reason})
	}
	var s Selection
next:
	for _, n := range names {
		for _, c := range cs {
			if c.re.MatchString(n) {
				s.Left = append(s.Left, Left{Name: n, Reason: c.reason})
				continue next
			}
		}
		s.Run = append(s.Run, n)
	}
	return s, nil
}

// Print writes how many specs the focus matched, how many run, and each one
// left out with its reason.
func (s Selection) Print(w io.Writer) {
	_, _ = fmt.Fprintf(w, "%d specs match the focus: %d run, %d left out\n", len(s.Run)+len(s.Left), len(s.Run), len(s.Left))
	for _, l := range s.Left {
		_, _ = fmt.Fprintf(w, "  left out: %s\n            because %s\n", l.Name, l.Reason)
	}
}

// List returns the specs of e2eTest that focus matches and skip ("": none)
// does not, by name, from a dry run: nothing runs and no cluster is needed.
func List(ctx context.Context, e2eTest, focus, skip string) ([]string, error) {
	dir, err := os.MkdirTemp("", "e2e-list-")
	if err != nil {
		return nil, fmt.Errorf("list specs: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	args := []string{"--ginkgo.dry-run", "--ginkgo.no-color", "--ginkgo.focus=" + focus, "--ginkgo.json-report=" + ReportFile(dir)}
	if skip != "" {
		args = append(args, "--ginkgo.skip="+skip)
	}
	cmd := exec.CommandContext(ctx, e2eTest, args...) //nolint:gosec // G204: the caller's e2e.test
	cmd.Dir = dir
	out, runErr := cmd.CombinedOutput()
	s, err := ReadReport(ReportFile(dir))
	if err != nil {
		return nil, fmt.Errorf("dry run of %s: %w\n%s", e2eTest, errors.Join(err, runErr), tailOf(string(out), 2000))
	}
	var names []string
	for _, sp := range s.Specs {
		names = append(names, sp.Name)
	}
	return names, nil
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
