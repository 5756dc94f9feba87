package bootstrap_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bootstrap"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Strict: true}, func(_ *rest.Config, c client.Client) (func(), error) {
		k8s = c
		return nil, nil
	}))
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

const objectsYAML = `
apiVersion: networking.estuary.io/v1
kind: Network
metadata:
  name: %[1]s-net
spec:
  type: Overlay
  mode: VXLAN
  netID: 9
---
# a comment-only document is skipped
---
apiVersion: networking.estuary.io/v1
kind: Subnet
metadata:
  name: %[1]s-new
spec:
  network: %[1]s-net
  range: {version: 4, cidr: 10.20.0.0/16}
  natOutgoing: true
---
apiVersion: networking.estuary.io/v1
kind: Subnet
metadata:
  name: %[1]s-keep
spec:
  network: %[1]s-net
  range: {version: 4, cidr: 10.21.0.0/16}
  natOutgoing: true
`

func objects(t *testing.T, prefix string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := bootstrap.Decode([]byte(strings.ReplaceAll(objectsYAML, "%[1]s", prefix)))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestLoad reads a directory laid out as the kubelet mounts a ConfigMap:
// each key a link into ..data, which links to a timestamped directory.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	stamp := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.Mkdir(stamp, 0o750); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(stamp, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("b-subnets.yaml", "apiVersion: networking.estuary.io/v1\nkind: Subnet\nmetadata: {name: s1}\n")
	write("a-network.yaml", strings.ReplaceAll(objectsYAML, "%[1]s", "load"))
	write("notes.txt", "not an object")
	links := map[string]string{"..data": filepath.Base(stamp), "a-network.yaml": "..data/a-network.yaml",
		"b-subnets.yaml": "..data/b-subnets.yaml", "notes.txt": "..data/notes.txt"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := bootstrap.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	want := "Network/load-net Subnet/load-new Subnet/load-keep Subnet/s1"
	if strings.Join(got, " ") != want {
		t.Errorf("loaded %v, want %s", got, want)
	}

	write("c-bad.yaml", "kind: Subnet\nmetadata: {name: nameless-version}\n")
	if err := os.Symlink("..data/c-bad.yaml", filepath.Join(dir, "c-bad.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := bootstrap.Load(dir); err == nil || !strings.Contains(err.Error(), "c-bad.yaml") || !strings.Contains(err.Error(), "apiVersion") {
		t.Errorf("Load of an object without apiVersion: %v; want an error naming the file and the field", err)
	}
}

// events records what the Creator reports.
type events struct {
	mu     sync.Mutex
	notes  []string
	failed chan struct{} // closed at the first Warning
	once   sync.Once
}

func (e *events) Eventf(regarding, _ runtime.Object, eventtype, reason, _, _ string, _ ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := regarding.(client.Object)
	e.notes = append(e.notes, eventtype+" "+reason+" "+o.GetName())
	if eventtype == "Warning" {
		e.once.Do(func() { close(e.failed) })
	}
}

func (e *events) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.notes {
		if n == s {
			return true
		}
	}
	return false
}

func clusterRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(ctx(t), cr); err != nil {
		t.Fatalf("create ClusterRole %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cr) })
	return cr
}

func cleanup(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	t.Cleanup(func() {
		for _, o := range objs {
			if err := k8s.Delete(context.Background(), o.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
}

var ownerGVK = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}

// TestCreatesAbsentKeepsExisting: the absent objects are created, owned by
// the owner; an object that exists is left exactly as it is.
func TestCreatesAbsentKeepsExisting(t *testing.T) {
	objs := objects(t, "keep")
	cleanup(t, objs)
	owner := clusterRole(t, "bootstrap-keep-owner")
	existing := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "keep-keep"}, Spec: estuaryv1.SubnetSpec{
		Network: "keep-net", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.21.0.0/16"}, NATOutgoing: ptr.To(false)}}
	if err := k8s.Create(ctx(t), existing); err != nil {
		t.Fatal(err)
	}
	ev := &events{failed: make(chan struct{})}
	wait := make(chan struct{})
	c := &bootstrap.Creator{
		Client: k8s, Reader: readBarrier{Reader: k8s, t: t, wait: wait}, Objects: objs,
		Owner: &bootstrap.Owner{GroupVersionKind: ownerGVK, Name: owner.Name},
		Wait:  wait, Events: ev, Log: testr.New(t), Backoff: 10 * time.Millisecond,
	}
	if !c.NeedLeaderElection() {
		t.Error("Creator must run on the leader only")
	}
	stopped := start(t, c)
	close(wait)
	select {
	case <-c.Done():
	case <-stopped:
		t.Fatal("Creator returned before every object existed")
	}

	net := &estuaryv1.Network{}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "keep-net"}, net); err != nil {
		t.Fatalf("Network keep-net not created: %v", err)
	}
	if refs := net.OwnerReferences; len(refs) != 1 || refs[0].UID != owner.UID || refs[0].Kind != "ClusterRole" || refs[0].Controller != nil {
		t.Errorf("Network keep-net owner references %+v; want one to ClusterRole %s (%s)", refs, owner.Name, owner.UID)
	}
	created := &estuaryv1.Subnet{}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "keep-new"}, created); err != nil || !ptr.Deref(created.Spec.NATOutgoing, false) {
		t.Errorf("Subnet keep-new: %v, natOutgoing %v; want created as given", err, ptr.Deref(created.Spec.NATOutgoing, false))
	}
	kept := &estuaryv1.Subnet{}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "keep-keep"}, kept); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(kept.Spec.NATOutgoing, true) || len(kept.OwnerReferences) != 0 || kept.ResourceVersion != existing.ResourceVersion {
		t.Errorf("Subnet keep-keep was changed (natOutgoing %v, owners %v, resourceVersion %s → %s); it existed and must be left alone",
			ptr.Deref(kept.Spec.NATOutgoing, true), kept.OwnerReferences, existing.ResourceVersion, kept.ResourceVersion)
	}
	for _, want := range []string{"Normal BootstrapCreated keep-net", "Normal BootstrapCreated keep-new"} {
		if !ev.has(want) {
			t.Errorf("no event %q in %v", want, ev.notes)
		}
	}
	if ev.has("Normal BootstrapCreated keep-keep") {
		t.Error("an event says the existing Subnet keep-keep was created")
	}
}

// TestRetriesUntilCreatable: while creating fails (here: the owner does not
// exist yet, as when the API server cannot reach the webhook) the Creator
// reports a Warning and retries; once it can, it creates.
func TestRetriesUntilCreatable(t *testing.T) {
	objs := objects(t, "retry")[:1]
	cleanup(t, objs)
	ev := &events{failed: make(chan struct{})}
	c := &bootstrap.Creator{
		Client: k8s, Reader: k8s, Objects: objs,
		Owner:  &bootstrap.Owner{GroupVersionKind: ownerGVK, Name: "bootstrap-retry-owner"},
		Events: ev, Log: testr.New(t), Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	}
	start(t, c)
	select {
	case <-ev.failed:
	case <-ctx(t).Done():
		t.Fatal("no Warning event while the owner is missing")
	}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "retry-net"}, &estuaryv1.Network{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Network retry-net exists before its owner: %v", err)
	}
	if !ev.has("Warning BootstrapFailed retry-net") {
		t.Errorf("events %v; want a Warning naming Network retry-net", ev.notes)
	}
	owner := clusterRole(t, "bootstrap-retry-owner")
	select {
	case <-c.Done():
	case <-ctx(t).Done():
		t.Fatal("not created once the owner exists")
	}
	net := &estuaryv1.Network{}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "retry-net"}, net); err != nil {
		t.Fatal(err)
	}
	if len(net.OwnerReferences) != 1 || net.OwnerReferences[0].UID != owner.UID {
		t.Errorf("owner references %+v, want ClusterRole %s", net.OwnerReferences, owner.UID)
	}
}

// start runs c until the test ends.
func start(t *testing.T, c *bootstrap.Creator) <-chan struct{} {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := c.Start(runCtx); err != nil {
			t.Errorf("Creator: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	return stopped
}

// readBarrier fails the test when the Creator reads before wait is closed.
type readBarrier struct {
	client.Reader
	t    *testing.T
	wait <-chan struct{}
}

func (r readBarrier) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	select {
	case <-r.wait:
	default:
		r.t.Errorf("Creator read %s before Wait was closed", key)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
