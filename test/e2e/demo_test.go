//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// The namespace and the cluster-scoped objects hack/demo.sh creates.
const (
	demoNamespace = "estuary-demo"
	demoNetwork   = "demo-underlay"
	demoSubnet    = "demo-underlay-v4"
)

// errorLine matches a line of the demo's output that reports a failure: one
// that contains "error", "fail", "refused" or "timed out" in any case.
var errorLine = regexp.MustCompile(`(?i)error|fail|refused|timed out`)

// docPath matches a documentation file the demo points to.
var docPath = regexp.MustCompile(`\bdocs/[a-z0-9-]+\.md\b`)

// TestDemo runs hack/demo.sh against the suite's lab (DEMO_REUSE_LAB=1 with
// the suite's state directory, estuary-lab, kubectl-estuary and kubectl):
// it exits 0, prints an ok line for every probe (Service endpoints and
// answers from every pod, one overlay subnet across the nodes, a retaining
// Deployment's re-created pod on its old address, the external host
// reaching an underlay pod without NAT, kubectl estuary naming the holder),
// points only to docs that exist, and prints no error line. The demo's
// namespace, its kept address and its underlay network are removed at the
// end.
func TestDemo(t *testing.T) {
	e := needLab(t)
	kubectl, _, err := e.kubectlPaths()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.deleteNamespace(t, demoNamespace)
		e.releaseKept(t, demoNamespace)
		e.deleteWhenUnused(t, &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: demoSubnet}})
		e.deleteWhenUnused(t, &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: demoNetwork}})
	})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "hack/demo.sh") // #nosec G204 -- test
	cmd.Dir = e.repo
	cmd.Env = append(os.Environ(),
		"DEMO_REUSE_LAB=1",
		"ESTUARY_LAB_STATE="+e.state,
		"ESTUARY_LAB="+e.bin,
		"KUBECTL_ESTUARY="+e.plugin(t),
		"ESTUARY_LAB_BIN_DIR="+filepath.Dir(kubectl),
		"DEMO_NAMESPACE="+demoNamespace,
	)
	start := time.Now()
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	t.Logf("hack/demo.sh (%.0fs):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("hack/demo.sh: %v", err)
	}

	lines := strings.Split(out, "\n")
	for _, l := range lines {
		if errorLine.MatchString(l) {
			t.Errorf("error line in the demo's output: %q", l)
		}
	}
	wantOK := []string{
		`Deployment netexec: 3 pods Ready on node-1, node-2, node-3$`,
		`Service netexec: 3 endpoints ready$`,
		`Service netexec \S+:80 answers pod netexec-\S+ from all 3 pods: netexec-\S+ netexec-\S+ netexec-\S+$`,
		`the pods on 3 nodes all have addresses of one overlay Subnet, ` + overlaySubnet + ` \(`,
		`the re-created pod of Deployment keep got its address \S+ back$`,
		`the external host ` + regexp.QuoteMeta(e.externalAddr) + ` reached pod underlay-\S+ at its own address ` +
			`10\.77\.100\.\d+, and the pod saw the host's own address ` + regexp.QuoteMeta(e.externalAddr) + `: no NAT`,
		`kubectl estuary names pod ` + demoNamespace + `/keep-\S+ as the holder of \S+$`,
	}
	oks := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "ok ") {
			oks++
		}
	}
	if oks != len(wantOK) {
		t.Errorf("the demo printed %d ok lines, want %d", oks, len(wantOK))
	}
	for _, w := range wantOK {
		re := regexp.MustCompile(`(?m)^ok +` + w)
		if !re.MatchString(out) {
			t.Errorf("no line of the demo's output matches %q", re)
		}
	}
	docs := docPath.FindAllString(out, -1)
	if len(docs) == 0 {
		t.Error("the demo points to no docs/*.md file")
	}
	for _, d := range docs {
		if _, err := os.Stat(filepath.Join(e.repo, d)); err != nil {
			t.Errorf("the demo points to %s: %v", d, err)
		}
	}
	if re := regexp.MustCompile(`(?m)^  export .*\bKUBECONFIG=` + regexp.QuoteMeta(e.kubeconfig) + ` `); !re.MatchString(out) {
		t.Errorf("no line of the demo's output matches %q", re)
	}
}

// deleteWhenUnused deletes a cluster-scoped Network or Subnet, again while
// the webhook refuses it for records or subnets that still use it, and
// waits until it is gone.
func (e *labEnv) deleteWhenUnused(t *testing.T, o client.Object) {
	t.Helper()
	eventually(t, fmt.Sprintf("%T %s deleted", o, o.GetName()), 2*time.Minute, func(ctx context.Context) error {
		if err := e.c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		switch err := e.c.Get(ctx, client.ObjectKeyFromObject(o), o); {
		case err == nil:
			return errors.New("still there")
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("read it back: %w", err)
		}
		return nil
	})
}
