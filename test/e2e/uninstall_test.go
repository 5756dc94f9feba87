//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/nodesnap"
	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// helm runs the checkout's helm (the one the lab installed estuary with)
// against the lab.
func (e *labEnv) helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.estuary.Helm, append(args, "--kubeconfig", e.kubeconfig)...) // #nosec G204 -- test
	cmd.Env = append(os.Environ(), e.helmEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// helmEnv is the helm home the lab installed estuary with (its registry
// configuration included).
func (e *labEnv) helmEnv() []string {
	home := filepath.Join(e.state, "estuary", "helm")
	return []string{"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
}

// nodeSnapshot takes a lab node's snapshot through `estuary-lab exec`.
func (e *labEnv) nodeSnapshot(ctx context.Context, node string) (nodesnap.Snapshot, error) {
	run := func(ctx context.Context, argv ...string) (string, error) { return e.run(ctx, node, argv...) }
	return nodesnap.Take(ctx, run, lab.NodeSnapshotOptions)
}

// TestUninstallLeavesNodesAsBefore: pods run across the nodes; they are
// deleted and `helm uninstall` removes estuary. Every node must then equal
// the snapshot the lab took before it first installed estuary (links,
// addresses, rules, routes, neighbours, FDB, nft tables, qdiscs, sysctls,
// the CNI, state, socket and routing-table directories). Installing again
// works: the daemons and manager become ready, CoreDNS gets a new address,
// and new pods across the nodes run.
func TestUninstallLeavesNodesAsBefore(t *testing.T) {
	e := needLab(t)
	ctx := testCtx(t, 15*time.Minute)
	before := map[string]nodesnap.Snapshot{}
	for _, n := range e.nodes {
		b, err := os.ReadFile(lab.PreInstallSnapshotPath(e.state, n))
		if err != nil {
			t.Fatalf("the lab has no snapshot of %s from before the install (a lab brought up by an older estuary-lab?): %v", n, err)
		}
		var s nodesnap.Snapshot
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("snapshot of %s: %v", n, err)
		}
		before[n] = s
	}
	ns := e.newNamespace(t, "uninstall")
	e.mustCreate(t, ns, pausePods("busy", 2*len(e.nodes), e.nodes)...)
	e.waitReady(t, ns, map[string]string{"app": "busy"}, 2*len(e.nodes), 3*time.Minute)
	// The snapshot sees estuary: while it runs, each node differs from
	// before the install by at least its tunnel, its conflist and its rules.
	for _, n := range e.nodes {
		now, err := e.nodeSnapshot(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		d := nodesnap.Diff(before[n], now)
		for _, want := range []string{"links: + " + vxlanDevice, "10-estuary.conflist", "rules4: + "} {
			if !slices.ContainsFunc(d, func(l string) bool { return strings.Contains(l, want) }) {
				t.Fatalf("%s running estuary shows no %q against its pre-install snapshot:\n%s", n, want, strings.Join(d, "\n"))
			}
		}
	}
	e.deletePods(t, ns, map[string]string{"app": "busy"})
	e.waitNoPods(t, ns, map[string]string{"app": "busy"}, 2*time.Minute)

	start := time.Now()
	if _, err := e.helm(ctx, "uninstall", lab.EstuaryRelease, "-n", lab.EstuaryNamespace, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.reinstall(t) })
	e.waitNoEstuaryPods(t)
	t.Logf("helm uninstall and every estuary pod gone in %s", time.Since(start).Round(time.Second))
	for _, n := range e.nodes {
		after, err := e.nodeSnapshot(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if d := nodesnap.Diff(before[n], after); len(d) > 0 {
			t.Errorf("%s after helm uninstall differs from before the install:\n%s", n, strings.Join(d, "\n"))
		}
	}
}

// reinstall installs estuary again as the lab did (its release, from the
// lab's registry), restarts CoreDNS (its
// pods lost their network with the uninstall) and checks pods across the
// nodes run.
func (e *labEnv) reinstall(t *testing.T) {
	t.Helper()
	ctx := testCtx(t, 10*time.Minute)
	if _, err := e.helm(ctx, "upgrade", "--install", lab.EstuaryRelease, e.estuary.Chart, "--version", e.estuary.ChartVersion,
		"--plain-http", "-n", lab.EstuaryNamespace, "--values", e.estuary.Values, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("install again: %v", err)
	}
	if err := e.waitInstall(); err != nil {
		t.Fatalf("install again: %v", err)
	}
	e.restartCoreDNS(t)
	ns := e.newNamespace(t, "reinstall")
	e.mustCreate(t, ns, pausePods("again", len(e.nodes), e.nodes)...)
	e.waitReady(t, ns, map[string]string{"app": "again"}, len(e.nodes), 3*time.Minute)
}

// restartCoreDNS re-creates the CoreDNS pods, whose network went with an
// uninstall, and waits until they are Ready.
func (e *labEnv) restartCoreDNS(t *testing.T) {
	t.Helper()
	ctx := testCtx(t, 5*time.Minute)
	var dep appsv1.Deployment
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: lab.DNSNamespace, Name: render.CoreDNSName}, &dep); err != nil {
		t.Fatal(err)
	}
	if err := e.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(lab.DNSNamespace),
		client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
		t.Fatalf("restart CoreDNS: %v", err)
	}
	e.waitReady(t, lab.DNSNamespace, dep.Spec.Selector.MatchLabels, int(*dep.Spec.Replicas), 3*time.Minute)
}
