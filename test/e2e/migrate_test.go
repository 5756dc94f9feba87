//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/ipamcheck"
	"github.com/estuary-cni/estuary/internal/migrate"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

// The hybridnet side of TestMigrateHybridnet: a StatefulSet db of 2 on the
// untagged VLAN underlay (rack1, which migrate creates) and a Deployment web
// of 2 on the lab's overlay (which exists, as the chart's default network).
const (
	migDB, migWeb    = "db", "web"
	migReplicas      = 2
	migOverlayOffset = 65190 // web's addresses: the overlay subnet's 65190th and 65191st
	migUnderlayFirst = 150   // db's addresses: rack1-v4's 150th and 151st
)

// TestMigrateHybridnet: the procedure of docs/migrate-from-hybridnet.md on
// the lab, with hybridnet's objects standing for a cluster that ran it. The
// nodes are cordoned (step 2), so web's pods exist but run nowhere, and
// db's pods, on a network estuary does not have yet, do not exist; hybridnet's
// CRDs are installed with Networks, Subnets and an IPInstance per address
// (a VLAN network of rack1 and the lab's overlay); the real kubectl-estuary
// binary migrates them (a dry run, then a write, then a second run that
// changes nothing). db's pods are then created, every pod is deleted and
// re-created by its workload, the nodes uncordoned, and each pod runs with
// exactly its hybridnet address: db-i with the address of ordinal i, web's
// pods with the two addresses hybridnet held for the Deployment, each
// recorded with hybridnet's MAC. kubectl estuary check is clean.
func TestMigrateHybridnet(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	e.installHybridnetCRDs(t)
	e.cleanupUnderlay(t)
	ns := e.newNamespace(t, "migrate")

	for _, n := range e.nodes {
		e.cordon(t, n, true)
		t.Cleanup(func() { e.cordon(t, n, false) })
	}
	sts, deploy := migWorkloads(ns)
	for _, o := range []client.Object{sts, deploy} {
		if err := e.c.Create(testCtx(t, time.Minute), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	// db's pods name rack1, which estuary does not have before the
	// migration: the webhook refuses them, so db has none yet.
	web := e.waitPending(t, ns, migReplicas)
	want := e.hybridnetObjects(t, ns, sts, web)

	plugin := e.plugin(t)
	dry, err := runPlugin(plugin, e.kubeconfig, "migrate", "hybridnet", "--dry-run")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, dry)
	}
	if n := strings.Count(dry, "kind: IPInstance"); n != len(want) {
		t.Errorf("dry run prints %d IPInstances, want %d:\n%s", n, len(want), dry)
	}
	out, err := runPlugin(plugin, e.kubeconfig, "migrate", "hybridnet")
	t.Logf("kubectl estuary migrate hybridnet:\n%s", out)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	wantLines := []string{"created network " + underlayNetwork, "created subnet " + underlaySubnet,
		"exists  network overlay, as migrate would write it", "exists  subnet " + overlaySubnet + ", as migrate would write it"}
	for addr := range want {
		wantLines = append(wantLines, "created ipinstance "+estuaryv1.InstanceName(netip.MustParseAddr(addr)))
	}
	requireLines(t, out, wantLines)
	again, err := runPlugin(plugin, e.kubeconfig, "migrate", "hybridnet")
	if err != nil || strings.Contains(again, "created ") {
		t.Errorf("second run: %v; want no object created:\n%s", err, again)
	}

	// A running manager holds records it did not write from its next audit
	// (at most 2 minutes); the procedure installs estuary after the
	// migration, when the manager's start reads them. Until then check
	// counts them as drift.
	eventually(t, "the manager holds every migrated record (kubectl estuary check clean)", 4*time.Minute, func(context.Context) error {
		out, err := runPlugin(plugin, e.kubeconfig, "check", "-o", "json", "--grace", "0s", "--interval", "1s")
		var r ipamcheck.Report
		if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
			return fmt.Errorf("check: %w; its report does not parse: %w", err, jerr)
		}
		if len(r.Findings) > 0 {
			return fmt.Errorf("check reports %s", findingLines(r))
		}
		return err
	})
	// db's pods are created now that rack1 exists (the StatefulSet
	// controller is nudged out of its backoff); then every pod is
	// re-created, and the nodes uncordoned.
	poke := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"e2e.estuary.io/poke":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	if err := e.c.Patch(testCtx(t, time.Minute), sts, poke); err != nil {
		t.Fatal(err)
	}
	e.waitPending(t, ns, 2*migReplicas)
	e.deletePods(t, ns, nil)
	for _, n := range e.nodes {
		e.cordon(t, n, false)
	}
	ready := e.waitReady(t, ns, nil, 2*migReplicas, 4*time.Minute)
	e.requireHybridnetAddresses(t, ns, ready, want)
	r := e.readCheck(t, plugin)
	if len(r.Findings) > 0 || r.Nodes != len(e.nodes) {
		t.Errorf("kubectl estuary check after the migration read %d of %d nodes and reports: %s", r.Nodes, len(e.nodes), findingLines(r))
	}
}

// migWorkloads are StatefulSet db (its pods on rack1, named with
// hybridnet's annotation, started in parallel) and Deployment web (on the
// overlay), both of migReplicas netexec pods.
func migWorkloads(ns string) (*appsv1.StatefulSet, *appsv1.Deployment) {
	tmpl := func(app string, ann map[string]string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}, Annotations: ann},
			Spec: podTemplate("", netexecContainer())}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: migDB}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](migReplicas), Selector: sel(migDB), PodManagementPolicy: appsv1.ParallelPodManagement,
		Template: tmpl(migDB, map[string]string{netmodel.HybridnetNetwork: underlayNetwork})}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: migWeb}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](migReplicas), Selector: sel(migWeb), Template: tmpl(migWeb, nil)}}
	return sts, deploy
}

// waitPending waits until ns has n pods, none of them scheduled (the nodes
// are cordoned), and returns them.
func (e *labEnv) waitPending(t *testing.T, ns string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%d unscheduled pods in %s", n, ns), 2*time.Minute, func(ctx context.Context) error {
		var l corev1.PodList
		if err := e.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				return fmt.Errorf("pod %s was scheduled to cordoned node %s", p.Name, p.Spec.NodeName)
			}
		}
		if len(l.Items) != n {
			return fmt.Errorf("%d of %d pods", len(l.Items), n)
		}
		pods = l.Items
		return nil
	})
	return pods
}

// installHybridnetCRDs creates the stand-ins for hybridnet's three CRDs
// (internal/migrate/testdata/crds) and deletes them, with every hybridnet
// object, when the test ends.
func (e *labEnv) installHybridnetCRDs(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.repo, "internal", "migrate", "testdata", "crds", "*.yaml"))
	if err != nil || len(files) != 3 {
		t.Fatalf("hybridnet's CRDs: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		crd := readOne(t, f)
		if err := e.c.Create(testCtx(t, time.Minute), crd); err != nil {
			t.Fatalf("create CRD %s: %v", crd.GetName(), err)
		}
		t.Cleanup(func() {
			if err := e.c.Delete(context.Background(), crd); err != nil {
				t.Errorf("delete CRD %s: %v", crd.GetName(), err)
			}
		})
	}
}

func readOne(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	objs, err := migrate.ReadObjects(path, f)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %v (%d objects)", path, err, len(objs))
	}
	return objs[0]
}

// cleanupUnderlay deletes, when the test ends, the network rack1 and its
// subnet that migrate creates, once no record is left in the subnet.
func (e *labEnv) cleanupUnderlay(t *testing.T) {
	t.Cleanup(func() {
		err := waitFor("no record left in "+underlaySubnet, 2*time.Minute, func(ctx context.Context) error {
			var l estuaryv1.IPInstanceList
			if err := e.c.List(ctx, &l, client.MatchingLabels{estuaryv1.LabelSubnet: underlaySubnet}); err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%d records", len(l.Items))
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		e.deleteAndWait(t, &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: underlaySubnet}})
		e.deleteAndWait(t, &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: underlayNetwork}})
	})
}

// migAddr is what hybridnet held for one address: the pod of ordinal
// ordinal of db, or (ordinal -1) any pod of web, and its MAC.
type migAddr struct {
	app     string
	ordinal int
	mac     string
}

// hybridnetObjects creates hybridnet's Networks and Subnets (rack1, and
// the lab's overlay as the chart created it) and the IPInstances hybridnet
// would have recorded: one per pod of web (bound to it) and one per
// ordinal of db (its pods away), and returns the addresses held.
func (e *labEnv) hybridnetObjects(t *testing.T, ns string, sts *appsv1.StatefulSet, web []corev1.Pod) map[string]migAddr {
	t.Helper()
	var ov estuaryv1.Network
	var ovSubnet estuaryv1.Subnet
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: "overlay"}, &ov); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: overlaySubnet}, &ovSubnet); err != nil {
		t.Fatal(err)
	}
	under := netip.MustParsePrefix(lab.UnderlayCIDR)
	gw := under.Addr().Next()
	docs := []string{
		fmt.Sprintf(`{apiVersion: networking.alibaba.com/v1, kind: Network, metadata: {name: %s}, spec: {type: Underlay, mode: VLAN, netID: 0, nodeSelector: {%s: %s}}}`,
			underlayNetwork, rackLabel, rackValue),
		fmt.Sprintf(`{apiVersion: networking.alibaba.com/v1, kind: Subnet, metadata: {name: %s}, spec: {network: %s, range: {version: "4", cidr: %s, gateway: %s, start: %s, end: %s}}}`,
			underlaySubnet, underlayNetwork, under, gw, nthAddr(under, 10), nthAddr(under, 200)),
		fmt.Sprintf(`{apiVersion: networking.alibaba.com/v1, kind: Network, metadata: {name: overlay}, spec: {type: Overlay, netID: %d}}`, *ov.Spec.NetID),
		fmt.Sprintf(`{apiVersion: networking.alibaba.com/v1, kind: Subnet, metadata: {name: %s}, spec: {network: overlay, range: {version: "4", cidr: %s}}}`,
			overlaySubnet, ovSubnet.Spec.Range.CIDR),
	}
	want := map[string]migAddr{}
	pods := slices.Clone(web)
	for i := range migReplicas {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", migDB, i), Labels: map[string]string{"app": migDB}}})
	}
	nweb := 0
	for _, p := range pods {
		var addr netip.Addr
		var bits int
		var spec string
		m := migAddr{app: p.Labels["app"], ordinal: -1}
		switch m.app {
		case migDB:
			m.ordinal = int(p.Name[len(p.Name)-1] - '0')
			addr, bits = nthAddr(under, migUnderlayFirst+m.ordinal), under.Bits()
			spec = fmt.Sprintf(`network: %s, subnet: %s, address: {version: "4", ip: %s/%d, gateway: %s, netID: 0, mac: "%s"},
  binding: {referredObject: {kind: StatefulSet, name: %s, uid: %s}, podName: %s, stateful: {index: %d}}`,
				underlayNetwork, underlaySubnet, addr, bits, gw, migMAC(addr), migDB, sts.UID, p.Name, m.ordinal)
		case migWeb:
			addr, bits = netip.MustParseAddr(e.overlayAddr(t, migOverlayOffset+nweb)), e.overlayBits(t)
			nweb++
			spec = fmt.Sprintf(`network: overlay, subnet: %s, address: {version: "4", ip: %s/%d, netID: %d, mac: "%s"},
  binding: {referredObject: {kind: Pod, name: %s, uid: %s}, podUID: %s, podName: %s}`,
				overlaySubnet, addr, bits, *ov.Spec.NetID, migMAC(addr), p.Name, p.UID, p.UID, p.Name)
		default:
			t.Fatalf("pod %s of no workload", p.Name)
		}
		m.mac = strings.ToLower(migMAC(addr))
		want[addr.String()] = m
		docs = append(docs, fmt.Sprintf("apiVersion: networking.alibaba.com/v1\nkind: IPInstance\nmetadata: {name: %s, namespace: %s, labels: {networking.alibaba.com/pod: %s}}\nspec: {%s}",
			strings.NewReplacer(".", "-", ":", "-").Replace(addr.String()), ns, p.Name, spec))
	}
	objs, err := migrate.ReadObjects("hybridnet objects", strings.NewReader(strings.Join(docs, "\n---\n")))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		// The CRDs were just created: the API serves them once established.
		eventually(t, "create hybridnet "+o.GetKind()+" "+o.GetName(), time.Minute, func(ctx context.Context) error {
			return e.c.Create(ctx, o.DeepCopy())
		})
	}
	return want
}

// migMAC is the MAC hybridnet gave addr: upper case, as hybridnet may
// write it.
func migMAC(addr netip.Addr) string {
	b := addr.As4()
	return fmt.Sprintf("EE:EE:%02X:%02X:%02X:%02X", b[0], b[1], b[2], b[3])
}

// requireHybridnetAddresses: each of db's pods runs with the address of its
// ordinal, web's pods with the addresses held for web, each recorded for it
// alone with hybridnet's MAC.
func (e *labEnv) requireHybridnetAddresses(t *testing.T, ns string, pods []corev1.Pod, want map[string]migAddr) {
	t.Helper()
	var webGot, webWant []string
	for a, m := range want {
		if m.app == migWeb {
			webWant = append(webWant, a)
		}
	}
	for _, p := range pods {
		m, ok := want[p.Status.PodIP]
		switch {
		case !ok:
			t.Errorf("pod %s runs with %s, an address hybridnet did not hold for it", p.Name, p.Status.PodIP)
			continue
		case m.app != p.Labels["app"]:
			t.Errorf("pod %s of %s runs with %s, held by hybridnet for %s", p.Name, p.Labels["app"], p.Status.PodIP, m.app)
		case m.app == migDB && p.Name != fmt.Sprintf("%s-%d", migDB, m.ordinal):
			t.Errorf("pod %s runs with %s, the address of %s-%d", p.Name, p.Status.PodIP, migDB, m.ordinal)
		case m.app == migWeb:
			webGot = append(webGot, p.Status.PodIP)
		}
		if len(p.Status.PodIPs) != 1 {
			t.Errorf("pod %s has addresses %v, want one", p.Name, p.Status.PodIPs)
		}
		ipi, err := e.podInstance(testCtx(t, time.Minute), ns, p.Name)
		if err != nil {
			t.Errorf("record of %s: %v", p.Name, err)
			continue
		}
		if instanceAddr(ipi) != p.Status.PodIP || ipi.Spec.Address.MAC != m.mac || ipi.Spec.Binding.PodUID != string(p.UID) {
			t.Errorf("record %s of %s: %s, MAC %q, pod UID %s; want %s, MAC %q, UID %s",
				ipi.Name, p.Name, ipi.Spec.Address.IP, ipi.Spec.Address.MAC, ipi.Spec.Binding.PodUID, p.Status.PodIP, m.mac, p.UID)
		}
	}
	slices.Sort(webGot)
	slices.Sort(webWant)
	if !slices.Equal(webGot, webWant) {
		t.Errorf("web's pods run with %v, want hybridnet's %v", webGot, webWant)
	}
}

// requireLines fails unless out contains every line of want.
func requireLines(t *testing.T, out string, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}
