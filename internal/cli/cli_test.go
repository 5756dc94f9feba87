package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/ipamcheck"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	cfg *rest.Config
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(c *rest.Config, cl client.Client) (func(), error) {
		cfg, k8s = c, cl
		return nil, nil
	}))
}

func bg() context.Context { return context.Background() }

// run runs `kubectl estuary args...` against the test API server with stdin
// as the answers, and returns its output and error.
func run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader(stdin), Out: &out, Err: &out}, func() (*rest.Config, error) { return cfg, nil })
	root.SetArgs(args)
	err := root.ExecuteContext(bg())
	return out.String(), err
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(bg(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(bg(), o, client.GracePeriodSeconds(0)) })
	}
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cli-"}}
	if err := k8s.Create(bg(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// subnetWithStatus creates a subnet and sets its status counts.
func subnetWithStatus(t *testing.T, name, cidr string, total, used int64) {
	t.Helper()
	sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.SubnetSpec{Network: "net-" + name, Range: estuaryv1.AddressRange{Version: 4, CIDR: cidr}}}
	create(t, sn)
	setUsed(t, name, total, used)
}

func setUsed(t *testing.T, name string, total, used int64) {
	t.Helper()
	sn := &estuaryv1.Subnet{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, sn); err != nil {
		t.Fatal(err)
	}
	sn.Status.Total, sn.Status.Used, sn.Status.Available = fmt.Sprint(total), used, fmt.Sprint(total-used)
	if err := k8s.Status().Update(bg(), sn); err != nil {
		t.Fatal(err)
	}
}

// runningPod creates a pod and reports addresses in its status.
func runningPod(t *testing.T, ns, name string, owner *metav1.OwnerReference, ips ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	create(t, p)
	p.Status.Phase = corev1.PodRunning
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if err := k8s.Status().Update(bg(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// recordFor creates the record of ip for pod ns/name.
func recordFor(t *testing.T, ip, subnet, ns, pod, uid string, owner estuaryv1.OwnerReference, phase estuaryv1.IPInstancePhase) *estuaryv1.IPInstance {
	t.Helper()
	return recordWith(t, ip, subnet, ns, pod, uid, owner, phase, nil)
}

// recordWith creates the record of ip for pod ns/name as recordFor does,
// after edit (when not nil) changed it.
func recordWith(t *testing.T, ip, subnet, ns, pod, uid string, owner estuaryv1.OwnerReference, phase estuaryv1.IPInstancePhase, edit func(*estuaryv1.IPInstance)) *estuaryv1.IPInstance {
	t.Helper()
	p := netip.MustParsePrefix(ip)
	ipi := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(p.Addr()),
			Labels: map[string]string{estuaryv1.LabelNamespace: ns, estuaryv1.LabelPod: pod, estuaryv1.LabelSubnet: subnet}},
		Spec: estuaryv1.IPInstanceSpec{Network: "net-" + subnet, Subnet: subnet,
			Address: estuaryv1.InstanceAddress{IP: ip, Version: 4},
			Binding: estuaryv1.Binding{Namespace: ns, PodName: pod, PodUID: uid, Owner: owner, NodeName: "n1"}},
		Status: estuaryv1.IPInstanceStatus{Phase: phase},
	}
	if owner.Kind == "StatefulSet" {
		ipi.Spec.Binding.StatefulOrdinal = ptr.To[int32](0)
	}
	if edit != nil {
		edit(ipi)
	}
	create(t, ipi)
	return ipi
}

func podOwner(p *corev1.Pod) estuaryv1.OwnerReference {
	return estuaryv1.OwnerReference{Kind: "Pod", Name: p.Name, UID: string(p.UID)}
}

func requireIn(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestGetIPAndWorkload(t *testing.T) {
	ns := namespace(t)
	subnetWithStatus(t, "cli-get", "10.90.0.0/24", 254, 3)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-7d9",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}}}
	create(t, rs)
	byRS := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}
	w1 := runningPod(t, ns, "web-7d9-a", byRS, "10.90.0.2")
	w2 := runningPod(t, ns, "web-7d9-b", byRS, "10.90.0.3")
	recordFor(t, "10.90.0.2/24", "cli-get", ns, w1.Name, string(w1.UID), podOwner(w1), estuaryv1.IPInstanceBound)
	recordFor(t, "10.90.0.3/24", "cli-get", ns, w2.Name, string(w2.UID), podOwner(w2), estuaryv1.IPInstanceBound)
	recordFor(t, "10.90.0.4/24", "cli-get", ns, "db-0", "", estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db", UID: "s-uid"}, estuaryv1.IPInstanceRetained)

	out, err := run(t, "", "get", "ip", "10.90.0.4")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "10.90.0.4/24", "Retained", ns+"/db-0 (no pod now)", "StatefulSet "+ns+"/db (ordinal 0)", "for the next pod db-0")
	if _, err := run(t, "", "get", "ip", "10.90.0.99"); err == nil || !strings.Contains(err.Error(), "not recorded") {
		t.Errorf("get ip of a free address: %v, want 'not recorded'", err)
	}
	if _, err := run(t, "", "get", "ip", "10.90.0"); err == nil || !strings.Contains(err.Error(), "not an IP address") {
		t.Errorf("get ip of a bad address: %v", err)
	}

	out, err = run(t, "", "-n", ns, "get", "workload", "deploy/web")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "10.90.0.2/24", "10.90.0.3/24", "web-7d9-a", "web-7d9-b")
	if strings.Contains(out, "10.90.0.4") {
		t.Errorf("the deployment's addresses include the StatefulSet's:\n%s", out)
	}
	out, err = run(t, "", "-n", ns, "get", "workload", "statefulset/db")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "10.90.0.4/24", "Retained")
	if _, err := run(t, "", "-n", ns, "get", "workload", "web"); err == nil || !strings.Contains(err.Error(), "KIND/NAME") {
		t.Errorf("get workload without a kind: %v", err)
	}
}

func TestSubnetsShowsUsage(t *testing.T) {
	subnetWithStatus(t, "cli-usage", "10.91.0.0/24", 200, 50)
	out, err := run(t, "", "subnets")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "net-cli-usage", "cli-usage", "10.91.0.0/24", "200", "50", "150", "25.0%", "IPv4")
}

func TestReleaseRefusesWhatIsUsedAndAsksFirst(t *testing.T) {
	ns := namespace(t)
	subnetWithStatus(t, "cli-rel", "10.92.0.0/24", 254, 2)
	p := runningPod(t, ns, "busy", nil, "10.92.0.2")
	recordFor(t, "10.92.0.2/24", "cli-rel", ns, p.Name, string(p.UID), podOwner(p), estuaryv1.IPInstanceBound)
	leak := recordFor(t, "10.92.0.3/24", "cli-rel", ns, "gone", "old-uid", estuaryv1.OwnerReference{Kind: "Pod", Name: "gone", UID: "old-uid"}, estuaryv1.IPInstanceBound)

	if _, err := run(t, "y\n", "release", "10.92.0.2"); err == nil || !strings.Contains(err.Error(), "pod "+ns+"/busy") {
		t.Errorf("release of a running pod's address: %v, want a refusal naming the pod", err)
	}
	if _, err := run(t, "n\n", "release", "10.92.0.3"); err == nil || !strings.Contains(err.Error(), "not confirmed") {
		t.Errorf("release answered no: %v", err)
	}
	for _, name := range []string{"10.92.0.2", leak.Name} {
		if err := k8s.Get(bg(), client.ObjectKey{Name: name}, &estuaryv1.IPInstance{}); err != nil {
			t.Errorf("ipinstance %s after refused releases: %v", name, err)
		}
	}
	out, err := run(t, "yes\n", "release", "10.92.0.3")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "released 10.92.0.3/24")
	if err := k8s.Get(bg(), client.ObjectKey{Name: leak.Name}, &estuaryv1.IPInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("released record still there: %v", err)
	}
}

// check reports a leak and a pod with two addresses (exit code 3); repair
// from its report releases exactly the leaked record and the address the
// pod does not use, and a record created after the report is untouched.
func TestCheckAndRepairFromReport(t *testing.T) {
	ns := namespace(t)
	subnetWithStatus(t, "cli-chk", "10.93.0.0/24", 254, 4)
	p := runningPod(t, ns, "twice", nil, "10.93.0.2")
	recordFor(t, "10.93.0.2/24", "cli-chk", ns, p.Name, string(p.UID), podOwner(p), estuaryv1.IPInstanceBound)
	recordFor(t, "10.93.0.3/24", "cli-chk", ns, p.Name, string(p.UID), podOwner(p), estuaryv1.IPInstanceBound)
	recordFor(t, "10.93.0.4/24", "cli-chk", ns, "ghost", "g-uid", estuaryv1.OwnerReference{Kind: "Pod", Name: "ghost", UID: "g-uid"}, estuaryv1.IPInstanceBound)
	other := runningPod(t, ns, "fine", nil, "10.93.0.5")
	recordFor(t, "10.93.0.5/24", "cli-chk", ns, other.Name, string(other.UID), podOwner(other), estuaryv1.IPInstanceBound)

	out, err := run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms")
	if ExitCode(err) != 3 {
		t.Fatalf("check of a broken cluster: exit %d (%v), want 3", ExitCode(err), err)
	}
	var r ipamcheck.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	var mine []string
	for _, f := range r.Findings {
		if f.Subnet == "cli-chk" || strings.HasPrefix(f.Pod, ns+"/") {
			mine = append(mine, string(f.Kind)+" "+f.Address)
		}
	}
	if got := strings.Join(mine, ", "); got != "Leaked 10.93.0.4/24, TwoAddresses 10.93.0.2/24, TwoAddresses 10.93.0.3/24" {
		t.Errorf("findings about this test's objects: %s", got)
	}
	text, _ := run(t, "", "check", "--grace", "0s", "--interval", "100ms")
	requireIn(t, text, "Leaked", "10.93.0.4/24", "TwoAddresses", ns+"/twice")

	report := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(report, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	later := recordFor(t, "10.93.0.6/24", "cli-chk", ns, "ghost2", "g2", estuaryv1.OwnerReference{Kind: "Pod", Name: "ghost2", UID: "g2"}, estuaryv1.IPInstanceBound)
	if _, err := run(t, "n\n", "repair", "--from-report", report); err == nil {
		t.Error("repair answered no went ahead")
	}
	out, err = run(t, "", "repair", "--from-report", report, "--yes")
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	requireIn(t, out, "released 10.93.0.4/24", "released 10.93.0.3/24", "left alone: TwoAddresses", "pod "+ns+"/twice uses this address")
	for name, want := range map[string]bool{"10.93.0.2": true, "10.93.0.3": false, "10.93.0.4": false, "10.93.0.5": true, later.Name: true} {
		err := k8s.Get(bg(), client.ObjectKey{Name: name}, &estuaryv1.IPInstance{})
		if exists := err == nil; exists != want {
			t.Errorf("after repair ipinstance %s exists=%t, want %t (%v)", name, exists, want, err)
		}
	}
}
