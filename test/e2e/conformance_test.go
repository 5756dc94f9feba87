//go:build lab

package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/conformance"
)

// conformanceSubset are the upstream [sig-network] [Conformance] specs that
// make test runs on the e2e lab: those that cross estuary's data path (pod to
// pod and node to pod over HTTP and UDP, Services by ClusterIP and NodePort,
// cluster DNS, the API server reaching pods, host ports). make conformance
// runs all of them (docs/conformance.md).
var conformanceSubset = []string{
	"Networking Granular Checks: Pods should function for intra-pod communication: http",
	"Networking Granular Checks: Pods should function for intra-pod communication: udp",
	"Networking Granular Checks: Pods should function for node-pod communication: http",
	"Networking Granular Checks: Pods should function for node-pod communication: udp",
	"Services should serve a basic endpoint from pods",
	"Services should be able to create a functioning NodePort service",
	"DNS should provide DNS for services",
	"Proxy version v1 should proxy through a service and a pod",
	"HostPort validates that there is no conflict between pods with same hostPort but different hostIP and protocol",
}

// TestUpstreamConformanceSubset runs conformanceSubset with the pinned
// Kubernetes version's own e2e.test (built from the Go module proxy) against
// the e2e lab, two processes at once (conformance specs that are not
// [Serial] may run side by side), and requires every one of them to run
// and pass.
func TestUpstreamConformanceSubset(t *testing.T) {
	e := needLab(t)
	e.runUpstream(t, `\[sig-network\] `, conformanceSubset, `.*\[Conformance\]`, conformance.SkipDefault, 2, 25*time.Minute)
}

// runUpstream runs the specs named in names (a spec's text after its
// [sig-network] container; the focus is prefix, one of them, then suffix) with
// the pinned Kubernetes version's own e2e.test (built from the Go module
// proxy when missing) against the lab, and requires every one of them to run
// and pass within timeout. With parallel > 1 it lists the specs the focus
// matches and runs them in that many e2e.test processes at once
// (conformance.RunSharded): only for specs that may run side by side.
func (e *labEnv) runUpstream(t *testing.T, prefix string, names []string, suffix, skip string, parallel int, timeout time.Duration) {
	t.Helper()
	kubectl, kubeconfig, err := e.kubectlPaths()
	if err != nil {
		t.Fatal(err)
	}
	e2eTest := filepath.Join(filepath.Dir(kubectl), "e2e.test")
	if _, err := os.Stat(e2eTest); err != nil {
		build := exec.Command("bash", filepath.Join(e.repo, "hack", "kube-binaries.sh"), "e2e.test") // #nosec G204 -- test
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build e2e.test: %v\n%s", err, out)
		}
	}
	quoted := make([]string, len(names))
	for i, s := range names {
		quoted[i] = regexp.QuoteMeta(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Minute)
	defer cancel()
	var out strings.Builder
	o := conformance.Options{
		E2ETest: e2eTest, Kubectl: kubectl, Kubeconfig: kubeconfig,
		Focus:     prefix + "(" + strings.Join(quoted, "|") + ")" + suffix,
		Skip:      skip,
		ReportDir: filepath.Join(e.tmp, "conformance-"+t.Name()),
		Timeout:   timeout,
		Output:    &out,
	}
	var s conformance.Summary
	if parallel > 1 {
		full, lerr := conformance.List(ctx, e2eTest, o.Focus, o.Skip)
		if lerr != nil {
			t.Fatal(lerr)
		}
		s, err = conformance.RunSharded(ctx, o, full, parallel)
	} else {
		s, err = conformance.Run(ctx, o)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out.String(), 4000))
	}
	var sum strings.Builder
	s.Print(&sum)
	t.Log("\n" + sum.String())
	passed, failed, _ := s.Count()
	if failed > 0 || passed != len(names) {
		t.Fatalf("%s; want %d passed, 0 failed\n%s", s.Line(), len(names), tail(out.String(), 8000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
