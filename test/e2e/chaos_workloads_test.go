//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// The chaos suite's workloads whose addresses outlive their pods:
//
//   - keep, a retaining Deployment (ip-retain: "true") of keepReplicas pods
//     that holds keepSpare more addresses: it starts with keepReplicas +
//     keepSpare pods and is scaled down, so that many of its addresses are
//     kept for it. Half its pods are deleted every wave, and the Deployment
//     is deleted and created again in two waves. Since a kept address is
//     always free for every replacement pod, each one must take a kept
//     address, and the Deployment holds the same addresses all run long.
//   - resv, a Deployment of resvReplicas pods with resvAddresses addresses
//     reserved for it beforehand with kubectl estuary reserve. All its pods
//     are deleted every wave; each replacement must take a reserved address.
const (
	keepName      = "keep"
	keepReplicas  = 6
	keepSpare     = 3
	resvName      = "resv"
	resvReplicas  = 3
	resvAddresses = 6
	// resvOffset is the position of the first reserved address past the
	// start of the overlay subnet, far from what next-fit hands out.
	resvOffset = 65100
)

// chaosWorkload is one such Deployment and what the suite saw of it.
type chaosWorkload struct {
	ns, name string
	replicas int
	retain   bool
	// held is every address kept or reserved for the workload: its pods'
	// and the free ones.
	held map[string]bool
	// before holds the UIDs of the pods that ran before the last churn.
	before map[types.UID]bool
	// deleted counts the pods the suite deleted, started the pods that
	// ran after a churn or a creation of the Deployment and were not there
	// before, onHeld those of them that run on an address in held;
	// redeploys counts deletions of the whole Deployment.
	deleted, started, onHeld, redeploys int
	problems                            int
	// logs are the manager's, quoted when a pod is not where it should be.
	logs *managerLogs
}

func (w *chaosWorkload) sel() map[string]string { return map[string]string{"app": w.name} }

func (w *chaosWorkload) kind() string {
	if w.retain {
		return "kept"
	}
	return "reserved"
}

// deployment is the workload's Deployment: pause pods, each node at most
// one pod ahead of another where it can be, on the lab's own nodes only
// (never on a node the suite registers and deletes).
func (w *chaosWorkload) deployment(replicas int, nodes []string) *appsv1.Deployment {
	ann := map[string]string{}
	if w.retain {
		ann[estuaryv1.AnnotationIPRetain] = "true"
	}
	spec := podTemplate("", pauseContainer())
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}},
		}}},
	}}
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: w.sel()},
	}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: w.sel()},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: w.sel(), Annotations: ann}, Spec: spec},
		},
	}
}

// startRetaining creates keep with keepReplicas + keepSpare pods, scales it
// down to keepReplicas and waits until the addresses of the pods that went
// are kept for it: it holds keepReplicas + keepSpare addresses.
func (e *labEnv) startRetaining(t *testing.T, ns string, logs *managerLogs) *chaosWorkload {
	t.Helper()
	w := &chaosWorkload{ns: ns, name: keepName, replicas: keepReplicas, retain: true, held: map[string]bool{}, before: map[types.UID]bool{}, logs: logs}
	if err := e.c.Create(testCtx(t, time.Minute), w.deployment(keepReplicas+keepSpare, e.nodes)); err != nil {
		t.Fatalf("create deployment %s: %v", keepName, err)
	}
	for _, p := range e.waitReady(t, ns, w.sel(), keepReplicas+keepSpare, 5*time.Minute) {
		w.held[p.Status.PodIP] = true
		w.before[p.UID] = true
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: keepName}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, keepReplicas))
	if err := e.c.Patch(testCtx(t, time.Minute), d, patch); err != nil {
		t.Fatalf("scale deployment %s to %d: %v", keepName, keepReplicas, err)
	}
	e.settleWorkload(t, w)
	if w.problems > 0 {
		t.Fatalf("deployment %s does not hold the %d addresses it had before it was scaled down", keepName, keepReplicas+keepSpare)
	}
	return w
}

// startReserved reserves resvAddresses addresses for deploy/resv with
// kubectl estuary reserve, then creates it.
func (e *labEnv) startReserved(t *testing.T, ns, plugin string, logs *managerLogs) *chaosWorkload {
	t.Helper()
	w := &chaosWorkload{ns: ns, name: resvName, replicas: resvReplicas, held: map[string]bool{}, before: map[types.UID]bool{}, logs: logs}
	firstAddr, lastAddr := e.overlayAddr(t, resvOffset), e.overlayAddr(t, resvOffset+resvAddresses-1)
	out, err := runPlugin(plugin, e.kubeconfig, "reserve", firstAddr+"-"+lastAddr, "--for", "deploy/"+resvName, "-n", ns)
	if err != nil {
		t.Fatalf("reserve %s-%s: %v\n%s", firstAddr, lastAddr, err, out)
	}
	for a := netip.MustParseAddr(firstAddr); ; a = a.Next() {
		w.held[a.String()] = true
		if a.String() == lastAddr {
			break
		}
	}
	eventually(t, fmt.Sprintf("%d addresses Reserved for deploy/%s", resvAddresses, resvName), time.Minute, func(ctx context.Context) error {
		got, err := e.workloadRecords(ctx, w)
		if err != nil {
			return err
		}
		if n := countPhase(got, estuaryv1.IPInstanceReserved); n != resvAddresses {
			return fmt.Errorf("%d of %d records Reserved", n, len(got))
		}
		return nil
	})
	if err := e.c.Create(testCtx(t, time.Minute), w.deployment(resvReplicas, e.nodes)); err != nil {
		t.Fatalf("create deployment %s: %v", resvName, err)
	}
	e.settleWorkload(t, w)
	return w
}

// workloadRecords are the records of ns whose owner is the workload's
// Deployment, by address.
func (e *labEnv) workloadRecords(ctx context.Context, w *chaosWorkload) (map[string]*estuaryv1.IPInstance, error) {
	l, err := e.instances(ctx, w.ns, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]*estuaryv1.IPInstance{}
	for i := range l {
		if o := l[i].Spec.Binding.Owner; o.Kind == "Deployment" && o.Name == w.name {
			out[instanceAddr(&l[i])] = &l[i]
		}
	}
	return out, nil
}

func countPhase(records map[string]*estuaryv1.IPInstance, phase estuaryv1.IPInstancePhase) int {
	n := 0
	for _, r := range records {
		if r.Status.Phase == phase {
			n++
		}
	}
	return n
}

// churn deletes pods of the workload (half of keep's, every one of resv's;
// with no grace period when force), for its ReplicaSet to replace.
func (e *labEnv) churn(t *testing.T, w *chaosWorkload, force bool) {
	t.Helper()
	var l corev1.PodList
	if err := e.c.List(testCtx(t, time.Minute), &l, client.InNamespace(w.ns), client.MatchingLabels(w.sel())); err != nil {
		t.Fatalf("list pods of %s: %v", w.name, err)
	}
	pods := slices.DeleteFunc(l.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	w.before = map[types.UID]bool{}
	for i := range pods {
		w.before[pods[i].UID] = true
	}
	var opts []client.DeleteOption
	if force {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	for i := range pods {
		if w.retain && i%2 == 1 {
			continue
		}
		if err := e.c.Delete(testCtx(t, time.Minute), &pods[i], opts...); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete pod %s of %s: %v", pods[i].Name, w.name, err)
		}
		w.deleted++
	}
}

// redeployWorkload deletes the workload's Deployment, waits until its pods are gone
// and every address it holds is free again (Retained or Reserved for it),
// and creates it again.
func (e *labEnv) redeployWorkload(t *testing.T, w *chaosWorkload) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.name}}
	if err := e.c.Delete(testCtx(t, time.Minute), d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatalf("delete deployment %s: %v", w.name, err)
	}
	e.waitWorkloadGone(t, w)
	w.before = map[types.UID]bool{}
	if err := e.c.Create(testCtx(t, time.Minute), w.deployment(w.replicas, e.nodes)); err != nil {
		t.Fatalf("create deployment %s again: %v", w.name, err)
	}
	w.redeploys++
}

// waitWorkloadGone waits until the workload's Deployment and pods are gone
// and every record it holds is free (Retained or Reserved).
func (e *labEnv) waitWorkloadGone(t *testing.T, w *chaosWorkload) {
	t.Helper()
	e.waitNoPods(t, w.ns, w.sel(), 5*time.Minute)
	eventually(t, fmt.Sprintf("deployment %s gone and its %d addresses free for it", w.name, len(w.held)), 3*time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("deployment still there (%w)", err)
		}
		got, err := e.workloadRecords(ctx, w)
		if err != nil {
			return err
		}
		for a, r := range got {
			if r.Status.Phase == estuaryv1.IPInstanceBound {
				return fmt.Errorf("record %s still Bound to pod %s", a, r.Spec.Binding.PodName)
			}
		}
		return nil
	})
}

// settleWorkload waits until the workload runs its pods, all Ready, and
// checks that every pod created since the last churn runs on an address
// held for the workload, and that the workload's records are exactly what
// it held: each running pod's Bound to it, the others free. A problem is
// reported, and what the records then show is taken as held from then on.
func (e *labEnv) settleWorkload(t *testing.T, w *chaosWorkload) {
	t.Helper()
	pods := e.waitReady(t, w.ns, w.sel(), w.replicas, 8*time.Minute)
	for _, p := range pods {
		if w.before[p.UID] {
			continue
		}
		w.started++
		if w.held[p.Status.PodIP] {
			w.onHeld++
			continue
		}
		w.problems++
		t.Errorf("pod %s (uid %s, created %s) of deployment %s runs on %s, not on one of the %d addresses %s for it %v; its record: %s; the manager's last lines on the pod:\n%s",
			p.Name, p.UID, p.CreationTimestamp.UTC().Format(time.RFC3339), w.name, p.Status.PodIP, len(w.held), w.kind(), sortedKeys(w.held), e.recordOf(p.Status.PodIP),
			strings.Join(w.logs.linesAbout(p.Name, 20), "\n"))
	}
	var got map[string]*estuaryv1.IPInstance
	err := waitFor(fmt.Sprintf("the records of deployment %s settled on its %d addresses", w.name, len(w.held)), 3*time.Minute, func(ctx context.Context) error {
		var err error
		if got, err = e.workloadRecords(ctx, w); err != nil {
			return err
		}
		return recordsMatch(w, pods, got)
	})
	if err != nil {
		w.problems++
		t.Error(err)
		if got != nil {
			w.held = map[string]bool{}
			for a := range got {
				w.held[a] = true
			}
		}
	}
	w.before = map[types.UID]bool{}
	for _, p := range pods {
		w.before[p.UID] = true
	}
}

// recordsMatch says how a workload's records differ from what it should
// hold: exactly the addresses in held, each running pod's Bound to it,
// every other free (Retained for keep, Reserved for resv).
func recordsMatch(w *chaosWorkload, pods []corev1.Pod, got map[string]*estuaryv1.IPInstance) error {
	if !maps.Equal(w.held, setOf(slices.Collect(maps.Keys(got)))) {
		return fmt.Errorf("records of %v, want %v", sortedKeys(setOf(slices.Collect(maps.Keys(got)))), sortedKeys(w.held))
	}
	free := estuaryv1.IPInstanceRetained
	if !w.retain {
		free = estuaryv1.IPInstanceReserved
	}
	bound := map[string]bool{}
	for _, p := range pods {
		r := got[p.Status.PodIP]
		if r == nil || r.Status.Phase != estuaryv1.IPInstanceBound || r.Spec.Binding.PodName != p.Name || r.Spec.Binding.PodUID != string(p.UID) {
			return fmt.Errorf("pod %s runs on %s, whose record is not Bound to it (%s)", p.Name, p.Status.PodIP, describeRecord(r))
		}
		bound[p.Status.PodIP] = true
	}
	for a, r := range got {
		if !bound[a] && r.Status.Phase != free {
			return fmt.Errorf("record %s no running pod uses is %s, want %s (%s)", a, r.Status.Phase, free, describeRecord(r))
		}
	}
	return nil
}

// recordOf describes the IPInstance of address a, as read now.
func (e *labEnv) recordOf(a string) string {
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r estuaryv1.IPInstance
	if err := e.c.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(addr)}, &r); err != nil {
		return err.Error()
	}
	return describeRecord(&r) + ", created " + r.CreationTimestamp.UTC().Format(time.RFC3339)
}

func describeRecord(r *estuaryv1.IPInstance) string {
	if r == nil {
		return "no record"
	}
	b := r.Spec.Binding
	return fmt.Sprintf("%s %s, pod %q uid %q, owner %s/%s", r.Name, r.Status.Phase, b.PodName, b.PodUID, b.Owner.Kind, b.Owner.Name)
}

func setOf(s []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}

func sortedKeys(m map[string]bool) []string {
	out := slices.Collect(maps.Keys(m))
	slices.Sort(out)
	return out
}

// releaseWorkloads deletes the workloads' Deployments and, once their
// addresses are free, releases every one of them with kubectl estuary
// release, and waits until no record of theirs is left.
func (e *labEnv) releaseWorkloads(t *testing.T, plugin string, ws ...*chaosWorkload) {
	t.Helper()
	for _, w := range ws {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.name}}
		if err := e.c.Delete(testCtx(t, time.Minute), d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete deployment %s: %v", w.name, err)
		}
	}
	for _, w := range ws {
		e.waitWorkloadGone(t, w)
		got, err := e.workloadRecords(testCtx(t, time.Minute), w)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range sortedKeys(setOf(slices.Collect(maps.Keys(got)))) {
			if out, err := runPlugin(plugin, e.kubeconfig, "release", a, "--yes"); err != nil {
				t.Errorf("release %s of deployment %s: %v\n%s", a, w.name, err, out)
			}
		}
		eventually(t, fmt.Sprintf("no record of deployment %s left", w.name), 2*time.Minute, func(ctx context.Context) error {
			got, err := e.workloadRecords(ctx, w)
			if err != nil {
				return err
			}
			if len(got) > 0 {
				return fmt.Errorf("%d left: %s", len(got), strings.Join(sortedKeys(setOf(slices.Collect(maps.Keys(got)))), ", "))
			}
			return nil
		})
	}
}

// summary is one line on what happened to the workload.
func (w *chaosWorkload) summary() string {
	return fmt.Sprintf("deploy/%s: %d addresses %s, %d pods deleted, %d deployment deletions, %d new pods, %d of them on a %s address, %d problems",
		w.name, len(w.held), w.kind(), w.deleted, w.redeploys, w.started, w.onHeld, w.kind(), w.problems)
}
