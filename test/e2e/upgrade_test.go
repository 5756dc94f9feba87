//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/internal/crdupgrade"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

// upgradeFrom is the earlier commit TestUpgradeWithoutAnOutage installs
// first (ESTUARY_UPGRADE_FROM overrides it), released as upgradeFromVersion
// into the lab's registry.
const (
	upgradeFrom        = "d2895dca5323cf1fb279f53335e516b51119e578"
	upgradeFromVersion = "0.0.0-alpha.upgrade"
)

// releasePrevious releases commit into the lab's registry with that
// commit's own release tool, for this machine's platform, and returns the
// worktree it was built from.
func (e *labEnv) releasePrevious(ctx context.Context, t *testing.T, commit string) string {
	t.Helper()
	tree := filepath.Join(e.tmp, "upgrade-from")
	if out, err := exec.CommandContext(ctx, "git", "-C", e.repo, "worktree", "add", "--detach", "--force", tree, commit).CombinedOutput(); err != nil { // #nosec G204 -- test
		t.Fatalf("check out %s (a clone with its history is needed): %v\n%s", commit, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("git", "-C", e.repo, "worktree", "remove", "--force", tree).Run() }) // #nosec G204 -- test
	platform := "linux/" + runtime.GOARCH
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/estuary-release", "--release", upgradeFromVersion, // #nosec G204 -- test
		"--registry", e.estuary.Registry, "--image-platforms", platform, "--plugin-platforms", platform,
		"--out", filepath.Join(e.tmp, "upgrade-from-release"), "--helm", e.estuary.Helm)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), e.helmEnv()...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release %s as %s: %v\n%s", commit, upgradeFromVersion, err, lastLines(string(out), 30))
	}
	t.Logf("released %s as %s into %s in %s", commit[:12], upgradeFromVersion, e.estuary.Registry, time.Since(start).Round(time.Second))
	return tree
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// putCRDs replaces the spec of the cluster's estuary CRDs with those in dir
// (the previous release's), dropping the annotations of a manager that
// upgraded them, as a cluster that ran only that release would have them.
func (e *labEnv) putCRDs(ctx context.Context, t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("CRDs in %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f) // #nosec G304 -- test
		if err != nil {
			t.Fatal(err)
		}
		var want unstructured.Unstructured
		if err := yaml.Unmarshal(b, &want.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(want.GroupVersionKind())
		if err := e.c.Get(ctx, client.ObjectKey{Name: want.GetName()}, cur); err != nil {
			t.Fatal(err)
		}
		cur.Object["spec"] = want.Object["spec"]
		a := cur.GetAnnotations()
		delete(a, crdupgrade.AnnotationRelease)
		delete(a, crdupgrade.AnnotationSpecHash)
		cur.SetAnnotations(a)
		if err := e.c.Update(ctx, cur); err != nil {
			t.Fatalf("put the previous CRD %s: %v", want.GetName(), err)
		}
	}
}

// podState is what must not change across the upgrade.
type podState struct {
	uid      string
	ip       string
	restarts int32
}

func statesOf(pods []corev1.Pod) map[string]podState {
	m := map[string]podState{}
	for _, p := range pods {
		s := podState{uid: string(p.UID), ip: p.Status.PodIP}
		for _, c := range p.Status.ContainerStatuses {
			s.restarts += c.RestartCount
		}
		m[p.Name] = s
	}
	return m
}

// probe is one path probed every upgradeProbeInterval during the upgrade.
type probe struct {
	what string
	p    *pinger
}

const upgradeProbeInterval = 100 * time.Millisecond

// httpProber GETs url from a namespace every upgradeProbeInterval, a new
// connection each time, and counts the failures.
type httpProber struct {
	what, nsPath, url string

	mu           sync.Mutex
	sent, failed int
	lastErr      error
}

func (s *httpProber) run(stop <-chan struct{}) {
	nsPath, url := s.nsPath, s.url
	tick := time.NewTicker(upgradeProbeInterval)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := httpGet(ctx, nsPath, url)
		cancel()
		s.mu.Lock()
		s.sent++
		if err != nil {
			s.failed++
			s.lastErr = err
		}
		s.mu.Unlock()
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// TestUpgradeWithoutAnOutage installs an earlier commit's release from the
// lab's registry (its CRDs too), runs pods on the overlay and the underlay,
// and probes every 0.1 s: pod to pod on one node and across nodes, overlay
// to underlay (ICMP echoes), node to pod on another node and a Service from
// a pod (HTTP, a new connection each time). It then upgrades to
// this checkout's release with `helm upgrade` and asserts that no probe
// was lost, that no pod restarted or changed its address, and that the
// manager brought the CRDs to this release's schema.
func TestUpgradeWithoutAnOutage(t *testing.T) {
	e := needLab(t)
	ctx := testCtx(t, 30*time.Minute)
	commit := upgradeFrom
	if c := os.Getenv("ESTUARY_UPGRADE_FROM"); c != "" {
		commit = c
	}
	tree := e.releasePrevious(ctx, t, commit)

	// From a clean cluster (the uninstall cleans every node) to the previous
	// release, with the previous release's CRDs.
	if _, err := e.helm(ctx, "uninstall", lab.EstuaryRelease, "-n", lab.EstuaryNamespace, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.reinstall(t) })
	e.waitNoEstuaryPods(t)
	e.putCRDs(ctx, t, filepath.Join(tree, "charts", "estuary", "crds"))
	if _, err := e.helm(ctx, "install", lab.EstuaryRelease, "oci://"+e.estuary.Registry+"/charts/estuary", "--version", upgradeFromVersion,
		"--plain-http", "-n", lab.EstuaryNamespace, "--values", previousValues(t, e.estuary.Values, tree), "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("install %s: %v", upgradeFromVersion, err)
	}
	if err := e.waitInstall(); err != nil {
		t.Fatal(err)
	}
	e.restartCoreDNS(t)

	ns, paths := e.probedWorkload(t, "upgrade")
	before := e.podStates(t, ns)
	probes := startOpProbes(t, paths)
	stopped := false
	stopProbes := func() (report []string, lost int) {
		if !stopped {
			stopped = true
			report, lost = probes.finish()
		}
		return report, lost
	}
	defer stopProbes()

	start := time.Now()
	if _, err := e.helm(ctx, "upgrade", lab.EstuaryRelease, e.estuary.Chart, "--version", e.estuary.ChartVersion,
		"--plain-http", "-n", lab.EstuaryNamespace, "--values", e.estuary.Values, "--wait", "--timeout", "10m"); err != nil {
		t.Fatalf("helm upgrade to %s: %v", e.estuary.ChartVersion, err)
	}
	e.waitRolledOut(t)
	t.Logf("helm upgrade %s -> %s and both rollouts done in %s", upgradeFromVersion, e.estuary.ChartVersion, time.Since(start).Round(time.Second))
	report, lost := stopProbes()
	t.Logf("probes through the upgrade: %s", strings.Join(report, "; "))
	if lost > 0 {
		t.Errorf("%d probes lost during the upgrade: %s", lost, strings.Join(report, "; "))
	}
	after := e.podStates(t, ns)
	for name, s := range before {
		if after[name] != s {
			t.Errorf("pod %s changed across the upgrade: before %+v, after %+v", name, s, after[name])
		}
	}
	e.checkCRDsUpgraded(t)
}

// podStates reads the uid, address and restarts of every pod of ns.
func (e *labEnv) podStates(t *testing.T, ns string) map[string]podState {
	t.Helper()
	var l corev1.PodList
	if err := e.c.List(testCtx(t, time.Minute), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return statesOf(l.Items)
}

// waitNoEstuaryPods waits until the release's pods are gone.
func (e *labEnv) waitNoEstuaryPods(t *testing.T) {
	t.Helper()
	eventually(t, "no estuary pod left", 2*time.Minute, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(lab.EstuaryNamespace), client.MatchingLabels{"app.kubernetes.io/part-of": "estuary"}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d estuary pods left, e.g. %s", len(pods.Items), pods.Items[0].Name)
		}
		return nil
	})
}

// waitRolledOut waits until every estuary pod runs this checkout's release
// (the released chart's images, by the digests pushed:
// <registry>/<image>@sha256:...) and is Ready.
func (e *labEnv) waitRolledOut(t *testing.T) {
	t.Helper()
	want := map[string]string{daemonName: e.estuary.Images["estuary-daemon"], managerName: e.estuary.Images["estuary-manager"]}
	eventually(t, "every estuary pod on the new release", 10*time.Minute, func(ctx context.Context) error {
		for component, image := range want {
			pods, err := e.systemPods(ctx, component, "")
			if err != nil {
				return err
			}
			for _, p := range pods {
				if p.Spec.Containers[0].Image != image || !podReady(&p) || p.DeletionTimestamp != nil {
					return fmt.Errorf("%s pod %s: image %s, ready %v", component, p.Name, p.Spec.Containers[0].Image, podReady(&p))
				}
			}
		}
		return nil
	})
}

// checkCRDsUpgraded: every estuary CRD carries this release's schema, as
// the manager wrote it.
func (e *labEnv) checkCRDsUpgraded(t *testing.T) {
	t.Helper()
	want, err := crdupgrade.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		hash, err := crdupgrade.SpecHash(w.Spec)
		if err != nil {
			t.Fatal(err)
		}
		cur := &unstructured.Unstructured{}
		cur.SetAPIVersion("apiextensions.k8s.io/v1")
		cur.SetKind("CustomResourceDefinition")
		if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: w.Name}, cur); err != nil {
			t.Fatal(err)
		}
		a := cur.GetAnnotations()
		if a[crdupgrade.AnnotationSpecHash] != hash || a[crdupgrade.AnnotationRelease] != e.estuary.ChartVersion {
			t.Errorf("CRD %s after the upgrade: spec hash %q release %q, want %q %q (this release's schema, written by its manager)",
				w.Name, a[crdupgrade.AnnotationSpecHash], a[crdupgrade.AnnotationRelease], hash, e.estuary.ChartVersion)
		}
		cats, _, _ := unstructured.NestedStringSlice(cur.Object, "spec", "names", "categories")
		if len(w.Spec.Names.Categories) > 0 && strings.Join(cats, ",") != strings.Join(w.Spec.Names.Categories, ",") {
			t.Errorf("CRD %s categories %v, want %v", w.Name, cats, w.Spec.Names.Categories)
		}
	}
}

// previousValues writes the lab's values without the keys the previous
// release's chart (its values.yaml in tree) does not have: its schema
// refuses keys added since. The upgrade then brings the lab's own values.
func previousValues(t *testing.T, values, tree string) string {
	t.Helper()
	read := func(p string) map[string]any {
		b, err := os.ReadFile(filepath.Clean(p))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return m
	}
	kept := knownKeys(read(values), read(filepath.Join(tree, "charts", "estuary", "values.yaml")))
	b, err := yaml.Marshal(kept)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "previous-values.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// knownKeys returns v without the keys chart's default values lack, map by map.
func knownKeys(v, chart map[string]any) map[string]any {
	out := map[string]any{}
	for k, val := range v {
		def, ok := chart[k]
		if !ok {
			continue
		}
		vm, isMap := val.(map[string]any)
		dm, defIsMap := def.(map[string]any)
		if isMap && defIsMap {
			val = knownKeys(vm, dm)
		}
		out[k] = val
	}
	return out
}
