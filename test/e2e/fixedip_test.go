//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/ipamcheck"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

// overlayBits is the prefix length of the lab's overlay subnet.
func (e *labEnv) overlayBits(t *testing.T) int {
	t.Helper()
	var sn estuaryv1.Subnet
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: overlaySubnet}, &sn); err != nil {
		t.Fatalf("get subnet %s: %v", overlaySubnet, err)
	}
	return netip.MustParsePrefix(sn.Spec.Range.CIDR).Bits()
}

// overlayAddr is the address off positions past the start of the lab's
// overlay subnet.
func (e *labEnv) overlayAddr(t *testing.T, off int) string {
	t.Helper()
	var sn estuaryv1.Subnet
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: overlaySubnet}, &sn); err != nil {
		t.Fatalf("get subnet %s: %v", overlaySubnet, err)
	}
	a := netip.MustParsePrefix(sn.Spec.Range.CIDR).Masked().Addr()
	for range off {
		a = a.Next()
	}
	return a.String()
}

func podIPs(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Status.PodIP)
	}
	slices.Sort(out)
	return out
}

// TestDeploymentRecreatedGetsItsAddresses: a Deployment of 5 pods whose
// template asks for retention, deleted and created again, runs its new
// pods on the same 5 addresses, kept for it meanwhile as Retained records.
func TestDeploymentRecreatedGetsItsAddresses(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "redeploy")
	before, after := e.redeploy(t, ns, 5, nil, nil)
	if !slices.Equal(before, after) {
		t.Fatalf("re-created Deployment runs on %v, want its old addresses %v", after, before)
	}
	e.checkNoDuplicates(t)
}

// TestFullNetworkRecreatedDeploymentRuns: a retaining Deployment that
// fills its Underlay network, deleted and created again while the
// domain's nodes are labelled full (its kept addresses are not free), is
// scheduled and runs on the same addresses: the webhook adds no capacity
// requirement for a pod whose workload keeps an address for it.
func TestFullNetworkRecreatedDeploymentRuns(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	e.createUnderlayRange(t, 240, 241)
	var ns string
	t.Cleanup(func() { e.releaseKept(t, ns) }) // after the namespace is gone, before the subnet goes
	ns = e.newNamespace(t, "full-redeploy")
	full := func() { e.waitAvailable(t, underlayNetwork, "false", underlayNodes) }
	before, after := e.redeploy(t, ns, 2, map[string]string{estuaryv1.AnnotationNetwork: underlayNetwork}, full)
	if !slices.Equal(before, after) {
		t.Fatalf("re-created Deployment runs on %v, want its old addresses %v", after, before)
	}
}

// waitAvailable waits until nodes carry the IPv4 availability label of
// network with value.
func (e *labEnv) waitAvailable(t *testing.T, network, value string, nodes []string) {
	t.Helper()
	key := netmodel.AvailableKey(network, family.IPv4)
	eventually(t, fmt.Sprintf("nodes %v labelled %s=%s", nodes, key, value), 2*time.Minute, func(ctx context.Context) error {
		for _, name := range nodes {
			var n corev1.Node
			if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
				return err
			}
			if n.Labels[key] != value {
				return fmt.Errorf("node %s: %s=%q", name, key, n.Labels[key])
			}
		}
		return nil
	})
}

// redeploy creates Deployment keep of n retaining netexec pods (template
// annotations ann added) in ns, deletes it, waits until its n addresses
// are Retained, calls between (if not nil), creates it again and returns
// the addresses of its pods before and after, each sorted.
func (e *labEnv) redeploy(t *testing.T, ns string, n int, ann map[string]string, between func()) (before, after []string) {
	t.Helper()
	labels := map[string]string{"app": "keep"}
	deploy := func() *appsv1.Deployment {
		tmpl := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{estuaryv1.AnnotationIPRetain: "true"}},
			Spec:       podTemplate("", netexecContainer()),
		}
		maps.Copy(tmpl.Annotations, ann)
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep"},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
		}
	}
	if err := e.c.Create(testCtx(t, time.Minute), deploy()); err != nil {
		t.Fatal(err)
	}
	before = podIPs(e.waitReady(t, ns, labels, n, 4*time.Minute))
	if err := e.c.Delete(testCtx(t, time.Minute), deploy(), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	e.waitNoPods(t, ns, labels, 3*time.Minute)
	e.waitRetained(t, ns, "keep", n)
	eventually(t, "Deployment keep gone", time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keep"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	if between != nil {
		between()
	}
	if err := e.c.Create(testCtx(t, time.Minute), deploy()); err != nil {
		t.Fatal(err)
	}
	return before, podIPs(e.waitReady(t, ns, labels, n, 4*time.Minute))
}

// plugin builds kubectl-estuary from the tree, once per lab, and returns
// its path.
func (e *labEnv) plugin(t *testing.T) string {
	t.Helper()
	plugin := filepath.Join(e.tmp, "kubectl-estuary")
	if _, err := os.Stat(plugin); err == nil {
		return plugin
	}
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-estuary")
	build.Dir = e.repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-estuary: %v\n%s", err, out)
	}
	return plugin
}

// releaseKept releases, with kubectl estuary release, the addresses kept
// for the workloads of ns, a namespace whose pods are gone, and waits
// until ns has no record left.
func (e *labEnv) releaseKept(t *testing.T, ns string) {
	t.Helper()
	var kept []string
	eventually(t, "every record of "+ns+" kept", 2*time.Minute, func(ctx context.Context) error {
		l, err := e.instances(ctx, ns, nil)
		if err != nil {
			return err
		}
		kept = kept[:0]
		for i := range l {
			if l[i].Status.Phase != estuaryv1.IPInstanceRetained {
				return fmt.Errorf("record %s is %s", l[i].Name, l[i].Status.Phase)
			}
			kept = append(kept, instanceAddr(&l[i]))
		}
		return nil
	})
	plugin := e.plugin(t)
	for _, a := range kept {
		if out, err := runPlugin(plugin, e.kubeconfig, "release", a, "--yes"); err != nil {
			t.Errorf("release %s: %v\n%s", a, err, out)
		}
	}
	e.waitNoInstances(t, ns)
}

// waitRetained waits until n records of ns are Retained, with an expiry,
// for the workload named owner.
func (e *labEnv) waitRetained(t *testing.T, ns, owner string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d records Retained for %s", n, owner), 2*time.Minute, func(ctx context.Context) error {
		l, err := e.instances(ctx, ns, nil)
		if err != nil {
			return err
		}
		got := 0
		for _, ipi := range l {
			if ipi.Status.Phase == estuaryv1.IPInstanceRetained && ipi.Spec.Binding.Owner.Name == owner && ipi.Status.ExpiresAt != nil {
				got++
			}
		}
		if got != n {
			return fmt.Errorf("%d of %d records retained with an expiry", got, len(l))
		}
		return nil
	})
}

// TestExplicitAddressOnEveryNode: a pod asking for an address with
// ip-address gets it, and becomes Ready (its kubelet reaches it), on each
// node in turn.
func TestExplicitAddressOnEveryNode(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "fixed")
	want := e.overlayAddr(t, 65250)
	for _, node := range e.nodes {
		p := netexecPod("fixed", node, map[string]string{"app": "fixed"})
		p.Annotations = map[string]string{estuaryv1.AnnotationIPAddress: want}
		e.mustCreate(t, ns, p)
		got := e.waitPods(t, ns, "fixed")["fixed"]
		if got.Status.PodIP != want || got.Spec.NodeName != node {
			t.Errorf("on %s: pod runs on %s with %s, want %s", node, got.Spec.NodeName, got.Status.PodIP, want)
		}
		if err := e.c.Delete(testCtx(t, time.Minute), &got, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		e.waitNoPods(t, ns, map[string]string{"app": "fixed"}, 2*time.Minute)
		e.waitNoInstances(t, ns)
	}
}

// TestStatefulSetPoolEntryFollowsOrdinal: a StatefulSet with ip-pool runs
// ordinal i on entry i, and a pod moved to another node keeps its entry.
func TestStatefulSetPoolEntryFollowsOrdinal(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "pool")
	entries := []string{e.overlayAddr(t, 65240), e.overlayAddr(t, 65230), e.overlayAddr(t, 65220)}
	sts := statefulSet(ns, "db", 3)
	sts.Spec.Template.Annotations = map[string]string{estuaryv1.AnnotationIPPool: strings.Join(entries, ",")}
	if err := e.c.Create(testCtx(t, time.Minute), sts); err != nil {
		t.Fatal(err)
	}
	pods := e.waitReady(t, ns, map[string]string{"app": "db"}, 3, 4*time.Minute)
	for _, p := range pods {
		var i int
		if _, err := fmt.Sscanf(p.Name, "db-%d", &i); err != nil || p.Status.PodIP != entries[i] {
			t.Fatalf("pod %s runs on %s, want entry %d %s", p.Name, p.Status.PodIP, i, entries[i])
		}
	}
	e.moveStatefulPod(t, ns, "db-1", entries[1])
}

// TestCheckFindsAHandMadeLeakAndRepairFixesIt runs the built kubectl
// estuary plugin: check, which also reads every node's daemon endpoints,
// exits non-zero and reports a record made by hand for a pod that does not
// exist as leaked; repair --from-report releases it, and a check after that
// no longer reports it.
func TestCheckFindsAHandMadeLeakAndRepairFixesIt(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "leak")
	plugin := e.plugin(t)
	report := filepath.Join(e.tmp, "leak-report.json")
	leak, out := e.handMadeLeak(t, ns, plugin)
	if err := os.WriteFile(report, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runPlugin(plugin, e.kubeconfig, "repair", "--from-report", report, "--yes"); err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	eventually(t, "the hand-made record released", time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Name: leak}, &estuaryv1.IPInstance{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ipinstance %s still there (%w)", leak, err)
		}
		return nil
	})
	// The lab has run other tests (pods force-deleted, daemons killed), so
	// the check may have findings of their own; this one's must be gone,
	// and every node's daemon must have been read.
	after := e.readCheck(t, plugin)
	if after.Nodes != len(e.nodes) || after.Count(ipamcheck.NodeUnreadable) > 0 {
		t.Errorf("check read the endpoints of %d of %d nodes: %s", after.Nodes, len(e.nodes), findingLines(after))
	}
	for _, f := range after.Findings {
		if f.Record == leak {
			t.Errorf("after repair, check still reports %s", f)
		}
	}
}

// readCheck runs check -o json and parses its report.
func (e *labEnv) readCheck(t *testing.T, plugin string) ipamcheck.Report {
	t.Helper()
	out, err := runPlugin(plugin, e.kubeconfig, "check", "-o", "json", "--grace", "0s", "--interval", "1s")
	var r ipamcheck.Report
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
		t.Fatalf("check: %v; its report does not parse: %v\n%s", err, jerr, out)
	}
	return r
}

// TestReleasedAddressIsNotReusedAtOnce: the address a deleted pod
// released is not the next pod's, since allocation moves on through the
// range before it wraps.
func TestReleasedAddressIsNotReusedAtOnce(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "nextfit")
	first := netexecPod("first", e.nodes[0], map[string]string{"app": "first"})
	e.mustCreate(t, ns, first)
	a := e.waitPods(t, ns, "first")["first"]
	if err := e.c.Delete(testCtx(t, time.Minute), &a, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	e.waitNoPods(t, ns, map[string]string{"app": "first"}, 2*time.Minute)
	e.waitNoInstances(t, ns)
	e.mustCreate(t, ns, netexecPod("second", e.nodes[0], map[string]string{"app": "second"}))
	b := e.waitPods(t, ns, "second")["second"]
	if b.Status.PodIP == a.Status.PodIP {
		t.Fatalf("the released address %s was handed out again at once", a.Status.PodIP)
	}
}

// handMadeLeak records an address for a pod that does not exist and runs
// check until it reports the record, returning the address and check's JSON
// report. The manager's audit releases such a record on its own within its
// interval; a record it released before check saw it is made again.
func (e *labEnv) handMadeLeak(t *testing.T, ns, plugin string) (string, string) {
	t.Helper()
	leak, bits := e.overlayAddr(t, 65210), e.overlayBits(t)
	for attempt := 1; ; attempt++ {
		ipi := &estuaryv1.IPInstance{
			ObjectMeta: metav1.ObjectMeta{Name: leak, Labels: map[string]string{estuaryv1.LabelNamespace: ns, estuaryv1.LabelPod: "ghost", estuaryv1.LabelSubnet: overlaySubnet}},
			Spec: estuaryv1.IPInstanceSpec{Network: "overlay", Subnet: overlaySubnet,
				Address: estuaryv1.InstanceAddress{IP: fmt.Sprintf("%s/%d", leak, bits), Version: 4},
				Binding: estuaryv1.Binding{Namespace: ns, PodName: "ghost", PodUID: "0000-ghost", NodeName: e.nodes[0],
					Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: "ghost", UID: "0000-ghost"}}},
			Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound},
		}
		if err := e.c.Create(testCtx(t, time.Minute), ipi); err != nil {
			t.Fatal(err)
		}
		out, err := runPlugin(plugin, e.kubeconfig, "check", "-o", "json", "--grace", "0s", "--interval", "1s")
		var r ipamcheck.Report
		if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
			t.Fatalf("check: %v; its report does not parse: %v\n%s", err, jerr, out)
		}
		if r.Nodes != len(e.nodes) || r.Count(ipamcheck.NodeUnreadable) > 0 {
			t.Errorf("check read the endpoints of %d of %d nodes: %s", r.Nodes, len(e.nodes), findingLines(r))
		}
		if err != nil && slices.ContainsFunc(r.Findings, func(f ipamcheck.Finding) bool { return f.Record == leak && f.Kind == ipamcheck.Leaked }) {
			return leak, out
		}
		getErr := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: leak}, &estuaryv1.IPInstance{})
		if !apierrors.IsNotFound(getErr) || attempt == 3 {
			t.Fatalf("check: err %v, want a non-zero exit naming %s; output:\n%s", err, leak, out)
		}
		t.Logf("attempt %d: the audit released the record before check read it; making it again", attempt)
	}
}

// runPlugin runs the plugin and returns what it wrote to stdout; a failure
// carries what it wrote to stderr.
func runPlugin(plugin, kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(plugin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl estuary %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
