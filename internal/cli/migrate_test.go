package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/migrate"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	hnCRDsOnce sync.Once
	errHNCRDs  error
)

// hnCRDs installs the stand-ins for hybridnet's CRDs (once per suite).
func hnCRDs(t *testing.T) {
	t.Helper()
	hnCRDsOnce.Do(func() {
		root, err := testenv.ModuleRoot()
		if err != nil {
			errHNCRDs = err
			return
		}
		_, errHNCRDs = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(root, "internal", "migrate", "testdata", "crds")}, ErrorIfPathMissing: true})
	})
	if errHNCRDs != nil {
		t.Fatalf("install hybridnet's CRDs: %v", errHNCRDs)
	}
}

// hnObjects creates hybridnet's objects from YAML, deleted when the test
// ends.
func hnObjects(t *testing.T, text string) {
	t.Helper()
	objs, err := migrate.ReadObjects("test objects", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		create(t, u)
	}
}

// migrateWorkloads creates, in ns, StatefulSet db (2 replicas) with its
// running pod db-0, and Deployment api with ReplicaSet api-5f and its
// running pod api-5f-x1.
func migrateWorkloads(t *testing.T, ns string) (db0, api *corev1.Pod, sts *appsv1.StatefulSet) {
	t.Helper()
	labels := map[string]string{"app": "x"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	sts = &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	create(t, sts, deploy)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-5f", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", UID: deploy.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: deploy.Spec.Selector, Template: tmpl}}
	create(t, rs)
	db0 = runningPod(t, ns, "db-0", &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: sts.UID, Controller: ptr.To(true)}, "10.187.1.10")
	api = runningPod(t, ns, "api-5f-x1", &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-5f", UID: rs.UID, Controller: ptr.To(true)},
		"10.187.0.20", "fd00:187::20")
	return db0, api, sts
}

// hnFixture is the hybridnet side of the migration tests: three networks,
// four subnets, and the addresses of db-0 (running), db-1 (away), the api
// pod (running, dual-stack) and a pod that is gone.
func hnFixture(ns string, db0, api *corev1.Pod, sts *appsv1.StatefulSet) string {
	return fmt.Sprintf(`
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: mig-ov}
spec: {type: Overlay, netID: 7}
---
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: mig-vlan}
spec: {type: Underlay, mode: VLAN, netID: 30, nodeSelector: {mig: vlan}}
---
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: mig-bgp}
spec:
  type: Underlay
  mode: BGP
  netID: 65010
  nodeSelector: {mig: bgp}
  config: {bgpPeers: [{asn: 65000, address: 10.187.9.1, password: pw, gracefulRestartSeconds: 300}]}
---
apiVersion: networking.alibaba.com/v1
kind: Subnet
metadata: {name: mig-ov4}
spec: {network: mig-ov, range: {version: "4", cidr: 10.187.0.0/24}}
---
apiVersion: networking.alibaba.com/v1
kind: Subnet
metadata: {name: mig-ov6}
spec: {network: mig-ov, range: {version: "6", cidr: "fd00:187::/112"}, config: {autoNatOutgoing: false}}
---
apiVersion: networking.alibaba.com/v1
kind: Subnet
metadata: {name: mig-vlan4}
spec:
  network: mig-vlan
  range: {version: "4", cidr: 10.187.1.0/24, gateway: 10.187.1.1, reservedIPs: [10.187.1.5], excludeIPs: [10.187.1.7, 10.187.1.6]}
---
apiVersion: networking.alibaba.com/v1
kind: Subnet
metadata: {name: mig-bgp4}
spec: {network: mig-bgp, range: {version: "4", cidr: 10.187.2.0/24}}
---
apiVersion: networking.alibaba.com/v1
kind: IPInstance
metadata: {name: 10-187-1-10, namespace: %[1]s}
spec:
  network: mig-vlan
  subnet: mig-vlan4
  address: {version: "4", ip: 10.187.1.10/24, gateway: 10.187.1.1, netID: 30, mac: "EE:EE:0A:BB:01:0A"}
  binding: {referredObject: {kind: StatefulSet, name: db, uid: %[2]s}, nodeName: n1, podUID: %[3]s, podName: db-0, stateful: {index: 0}}
---
apiVersion: networking.alibaba.com/v1
kind: IPInstance
metadata: {name: 10-187-1-11, namespace: %[1]s}
spec:
  network: mig-vlan
  subnet: mig-vlan4
  address: {version: "4", ip: 10.187.1.11/24, gateway: 10.187.1.1, netID: 30, mac: "ee:ee:0a:bb:01:0b"}
  binding: {referredObject: {kind: StatefulSet, name: db, uid: %[2]s}, podName: db-1, stateful: {index: 1}}
---
apiVersion: networking.alibaba.com/v1
kind: IPInstance
metadata: {name: 10-187-0-20, namespace: %[1]s}
spec:
  network: mig-ov
  subnet: mig-ov4
  address: {version: "4", ip: 10.187.0.20/24, netID: 7, mac: "ee:ee:0a:bb:00:14"}
  binding: {referredObject: {kind: Pod, name: api-5f-x1, uid: %[4]s}, nodeName: n1, podUID: %[4]s, podName: api-5f-x1}
---
apiVersion: networking.alibaba.com/v1
kind: IPInstance
metadata: {name: fd00-187-0-0-0-0-0-20, namespace: %[1]s}
spec:
  network: mig-ov
  subnet: mig-ov6
  address: {version: "6", ip: "fd00:187::20/112", netID: 7, mac: "ee:ee:0a:bb:00:14"}
  binding: {referredObject: {kind: Pod, name: api-5f-x1, uid: %[4]s}, nodeName: n1, podUID: %[4]s, podName: api-5f-x1}
---
apiVersion: networking.alibaba.com/v1
kind: IPInstance
metadata: {name: 10-187-0-21, namespace: %[1]s}
spec:
  network: mig-ov
  subnet: mig-ov4
  address: {version: "4", ip: 10.187.0.21/24, netID: 7}
  binding: {referredObject: {kind: Pod, name: gone, uid: uid-gone}, podUID: uid-gone, podName: gone}
`, ns, sts.UID, db0.UID, api.UID)
}

// migratedRecords are the records the fixture migrates.
var migratedRecords = []string{"10.187.1.10", "10.187.1.11", "10.187.0.20", "fd00-187--20"}

// cleanupMigrated deletes what a migration wrote, when the test ends.
func cleanupMigrated(t *testing.T, ns string) {
	t.Cleanup(func() {
		for _, name := range migratedRecords {
			_ = k8s.Delete(bg(), &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		for _, name := range []string{"mig-ov4", "mig-ov6", "mig-vlan4", "mig-bgp4"} {
			_ = k8s.Delete(bg(), &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		for _, name := range []string{"mig-ov", "mig-vlan", "mig-bgp"} {
			_ = k8s.Delete(bg(), &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		_ = k8s.Delete(bg(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mig-bgp-bgp-passwords"}})
	})
}

// export writes objs, read back as unstructured (with their kinds), to a
// YAML file as kubectl get -o yaml prints a list.
func export(t *testing.T, objs ...client.Object) string {
	t.Helper()
	var items []any
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		gvk, err := k8s.GroupVersionKindFor(o)
		if err != nil {
			t.Fatal(err)
		}
		u.SetGroupVersionKind(gvk)
		if err := k8s.Get(bg(), client.ObjectKeyFromObject(o), u); err != nil {
			t.Fatal(err)
		}
		items = append(items, u.Object)
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "export.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The whole path on a real API server: a dry run prints the objects and
// writes nothing (the same from the cluster and, offline, from exported
// files); a run writes networks, subnets, the BGP Secret and the address
// records; a second run changes nothing; what was not migrated fails the
// command with the report.
func TestMigrateHybridnet(t *testing.T) {
	hnCRDs(t)
	ns := namespace(t)
	db0, api, sts := migrateWorkloads(t, ns)
	fixture := hnFixture(ns, db0, api, sts)
	hnObjects(t, fixture)
	cleanupMigrated(t, ns)
	args := []string{"migrate", "hybridnet", "--secret-namespace", ns}

	dry, err := run(t, "", append(args, "--dry-run")...)
	if err == nil || !strings.Contains(err.Error(), "1 item(s) not migrated") {
		t.Fatalf("dry run: %v, want a failure for the one address not migrated", err)
	}
	requireIn(t, dry, "kind: Network\n", "name: mig-bgp-bgp-passwords\n", "phase: Retained\n", "phase: Bound\n",
		"# not migrated (1):\n", "ipinstance "+ns+"/10-187-0-21: pod "+ns+"/gone is gone: hybridnet releases its address")
	if err := k8s.Get(bg(), client.ObjectKey{Name: "mig-ov"}, &estuaryv1.Network{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run wrote network mig-ov: %v", err)
	}

	var exported []client.Object
	for _, u := range mustRead(t, fixture) {
		exported = append(exported, u)
	}
	file := export(t, append(exported, db0, api, sts, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-5f"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}})...)
	var buf bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader(""), Out: &buf, Err: &buf}, func() (*rest.Config, error) {
		return nil, errors.New("a dry run from files must not reach the cluster")
	})
	root.SetArgs(append(args, "--dry-run", "-f", file))
	if err := root.ExecuteContext(bg()); err == nil || !strings.Contains(err.Error(), "1 item(s) not migrated") {
		t.Errorf("dry run from files: %v", err)
	}
	if offline := buf.String(); offline != dry {
		t.Errorf("a dry run from exported files differs from one against the cluster:\n%s\n---- cluster:\n%s", offline, dry)
	}

	out, err := run(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "1 item(s) not migrated") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	requireIn(t, out, "created secret "+ns+"/mig-bgp-bgp-passwords", "created network mig-ov", "created subnet mig-vlan4",
		"created ipinstance 10.187.1.11 (10.187.1.11/24 Retained for StatefulSet "+ns+"/db, pod db-1)",
		"created ipinstance fd00-187--20 (fd00:187::20/112 Bound for Deployment "+ns+"/api, pod api-5f-x1)",
		"12 created, 0 already as migrate would write them")
	requireMigrated(t, ns, db0, api, sts)

	before := versions(t, ns)
	again, err := run(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "1 item(s) not migrated") {
		t.Fatalf("second run: %v\n%s", err, again)
	}
	requireIn(t, again, "0 created, 12 already as migrate would write them, 0 address records already kept for their workload, 0 not written or differing")
	if after := versions(t, ns); !equality.Semantic.DeepEqual(after, before) {
		t.Errorf("the second run changed objects: %v -> %v", before, after)
	}
}

func mustRead(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := migrate.ReadObjects("fixture", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetNamespace() == "" && u.GetKind() == "IPInstance" {
			t.Fatalf("ipinstance %s has no namespace", u.GetName())
		}
	}
	return objs
}

// requireMigrated checks the estuary objects the fixture migrates to.
func requireMigrated(t *testing.T, ns string, db0, api *corev1.Pod, sts *appsv1.StatefulSet) {
	t.Helper()
	bgp := &estuaryv1.Network{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "mig-bgp"}, bgp); err != nil {
		t.Fatal(err)
	}
	wantPeer := estuaryv1.BGPPeer{Address: "10.187.9.1", ASN: 65000, GracefulRestartSeconds: ptr.To[int32](300), RequireEstablished: true,
		PasswordSecretRef: &estuaryv1.SecretKeyReference{Namespace: ns, Name: "mig-bgp-bgp-passwords", Key: "10.187.9.1"}}
	if bgp.Spec.Mode != estuaryv1.NetworkModeBGP || ptr.Deref(bgp.Spec.NetID, 0) != 65010 || len(bgp.Spec.BGPPeers) != 1 ||
		!equality.Semantic.DeepEqual(bgp.Spec.BGPPeers[0], wantPeer) {
		t.Errorf("network mig-bgp: %+v", bgp.Spec)
	}
	secret := &corev1.Secret{}
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: "mig-bgp-bgp-passwords"}, secret); err != nil || string(secret.Data["10.187.9.1"]) != "pw" {
		t.Errorf("BGP password Secret: %v %v", secret.Data, err)
	}
	vlan := &estuaryv1.Subnet{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "mig-vlan4"}, vlan); err != nil {
		t.Fatal(err)
	}
	r := vlan.Spec.Range
	if r.Version != 4 || r.Gateway != "10.187.1.1" || !equality.Semantic.DeepEqual(r.ReservedIPs, []estuaryv1.AddressOrRange{"10.187.1.5"}) ||
		!equality.Semantic.DeepEqual(r.ExcludeIPs, []estuaryv1.AddressOrRange{"10.187.1.6-10.187.1.7"}) || ptr.Deref(vlan.Spec.NATOutgoing, true) {
		t.Errorf("subnet mig-vlan4: %+v", vlan.Spec)
	}
	v6 := &estuaryv1.Subnet{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "mig-ov6"}, v6); err != nil || v6.Spec.Range.Version != 6 || ptr.Deref(v6.Spec.NATOutgoing, true) {
		t.Errorf("subnet mig-ov6: %+v %v", v6.Spec, err)
	}
	for name, want := range map[string]struct {
		phase    estuaryv1.IPInstancePhase
		pod, uid string
		owner    estuaryv1.OwnerReference
		retained bool
	}{
		"10.187.1.10":  {estuaryv1.IPInstanceBound, "db-0", string(db0.UID), estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db", UID: string(sts.UID)}, false},
		"10.187.1.11":  {estuaryv1.IPInstanceRetained, "db-1", "", estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db", UID: string(sts.UID)}, false},
		"10.187.0.20":  {estuaryv1.IPInstanceBound, "api-5f-x1", string(api.UID), estuaryv1.OwnerReference{Kind: "Deployment", Name: "api", UID: ownerUID(t, ns, "api")}, true},
		"fd00-187--20": {estuaryv1.IPInstanceBound, "api-5f-x1", string(api.UID), estuaryv1.OwnerReference{Kind: "Deployment", Name: "api", UID: ownerUID(t, ns, "api")}, true},
	} {
		ipi := &estuaryv1.IPInstance{}
		if err := k8s.Get(bg(), client.ObjectKey{Name: name}, ipi); err != nil {
			t.Errorf("record %s: %v", name, err)
			continue
		}
		b := ipi.Spec.Binding
		if ipi.Status.Phase != want.phase || b.Namespace != ns || b.PodName != want.pod || b.PodUID != want.uid || b.Owner != want.owner ||
			(ipi.Spec.Retention != nil) != want.retained || ipi.Spec.Address.MAC == "" {
			t.Errorf("record %s: %+v %+v", name, ipi.Spec, ipi.Status)
		}
	}
}

func ownerUID(t *testing.T, ns, deploy string) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: deploy}, d); err != nil {
		t.Fatal(err)
	}
	return string(d.UID)
}

// versions maps every object the fixture migrates to its resourceVersion.
func versions(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	read := func(key client.ObjectKey, obj client.Object) {
		if err := k8s.Get(bg(), key, obj); err != nil {
			t.Fatalf("%T %s: %v", obj, key, err)
		}
		out[fmt.Sprintf("%T %s", obj, key)] = obj.GetResourceVersion()
	}
	for _, name := range migratedRecords {
		read(client.ObjectKey{Name: name}, &estuaryv1.IPInstance{})
	}
	for _, name := range []string{"mig-ov4", "mig-ov6", "mig-vlan4", "mig-bgp4"} {
		read(client.ObjectKey{Name: name}, &estuaryv1.Subnet{})
	}
	for _, name := range []string{"mig-ov", "mig-vlan", "mig-bgp"} {
		read(client.ObjectKey{Name: name}, &estuaryv1.Network{})
	}
	read(client.ObjectKey{Namespace: ns, Name: "mig-bgp-bgp-passwords"}, &corev1.Secret{})
	return out
}

// An existing object that differs from what migrate would write is left as
// it is and fails the command; a record the manager has since bound to a
// new pod of the same workload (while hybridnet's still names the pod
// before) is left as it is without failing.
func TestMigrateHybridnetLeavesExistingObjects(t *testing.T) {
	hnCRDs(t)
	ns := namespace(t)
	db0, api, sts := migrateWorkloads(t, ns)
	hnObjects(t, hnFixture(ns, db0, api, sts))
	cleanupMigrated(t, ns)
	args := []string{"migrate", "hybridnet", "--secret-namespace", ns}
	if out, err := run(t, "", args...); !strings.Contains(out, "12 created") {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	sn := &estuaryv1.Subnet{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "mig-bgp4"}, sn); err != nil {
		t.Fatal(err)
	}
	sn.Spec.NATOutgoing = ptr.To(true)
	if err := k8s.Update(bg(), sn); err != nil {
		t.Fatal(err)
	}
	db1 := runningPod(t, ns, "db-1", &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: sts.UID, Controller: ptr.To(true)}, "10.187.1.11")
	rec := &estuaryv1.IPInstance{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "10.187.1.11"}, rec); err != nil {
		t.Fatal(err)
	}
	rec.Spec.Binding.PodUID, rec.Spec.Binding.NodeName, rec.Status.Phase = string(db1.UID), "n1", estuaryv1.IPInstanceBound
	if err := k8s.Update(bg(), rec); err != nil {
		t.Fatal(err)
	}
	// hybridnet's record still names the pod db-1 had before.
	hn := &unstructured.Unstructured{}
	hn.SetGroupVersionKind(migrate.GroupVersion.WithKind("IPInstance"))
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: "10-187-1-11"}, hn); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(hn.Object, "uid-db-1-before", "spec", "binding", "podUID"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(bg(), hn); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "1 object(s) not written or differing, 1 item(s) not migrated") {
		t.Fatalf("run over a differing subnet: %v\n%s", err, out)
	}
	requireIn(t, out, "differs subnet mig-bgp4 exists and differs from what migrate would write; left as it is: spec.natOutgoing is true, migrate would write false",
		"kept    ipinstance 10.187.1.11: already recorded for the same workload (10.187.1.11/24 Bound for StatefulSet "+ns+"/db, pod db-1)",
		"0 created, 10 already as migrate would write them, 1 address records already kept for their workload, 1 not written or differing")
	after := &estuaryv1.Subnet{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "mig-bgp4"}, after); err != nil || !ptr.Deref(after.Spec.NATOutgoing, false) {
		t.Errorf("the differing subnet was changed: %+v %v", after.Spec, err)
	}
}
