package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
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
)

// retained makes a record Retained as the manager leaves it when its pod
// goes: no pod UID, no node, kept with ttl until expires (nil: unset).
func retained(ttl *time.Duration, expires *time.Time) func(*estuaryv1.IPInstance) {
	return func(ipi *estuaryv1.IPInstance) {
		ipi.Spec.Binding.PodUID, ipi.Spec.Binding.NodeName = "", ""
		ipi.Spec.Retention = &estuaryv1.Retention{}
		if ttl != nil {
			ipi.Spec.Retention.TTL = &metav1.Duration{Duration: *ttl}
		}
		if expires != nil {
			ipi.Status.ExpiresAt = &metav1.Time{Time: *expires}
		}
	}
}

// lineWith is the line of out that holds s, or "".
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// field is the value of the "Key:" line of get ip's output.
func field(out, key string) string {
	return strings.TrimSpace(strings.TrimPrefix(lineWith(out, key+":"), key+":"))
}

func requireField(t *testing.T, out, key, want string) {
	t.Helper()
	if got := field(out, key); got != want {
		t.Errorf("%s: %q, want %q in:\n%s", key, got, want, out)
	}
}

func requireRow(t *testing.T, out, key string, want ...string) {
	t.Helper()
	row := lineWith(out, key)
	if row == "" {
		t.Errorf("no row with %q:\n%s", key, out)
		return
	}
	requireIn(t, row, want...)
}

// heldFixture records, in a new namespace and subnet cli-held, for
// Deployment web: a Retained address (.2, ttl 1h, expiring at the time
// returned), a reservation (.3, made with reserve) and a Bound address of a
// running pod that retains it (.5); and a CronJob's Retained address
// without expiry (.4).
func heldFixture(t *testing.T) (ns string, expires time.Time) {
	t.Helper()
	ns = namespace(t)
	subnetWithStatus(t, "cli-held", "10.96.0.0/24", 254, 4)
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(bg(), &estuaryv1.IPInstance{}, client.MatchingLabels{estuaryv1.LabelSubnet: "cli-held"})
	})
	web := estuaryv1.OwnerReference{Kind: "Deployment", Name: "web", UID: "d-uid"}
	hour := time.Hour
	expires = time.Now().Add(time.Hour).Truncate(time.Second)
	recordWith(t, "10.96.0.2/24", "cli-held", ns, "web-7d9-old", "", web, estuaryv1.IPInstanceRetained, retained(&hour, &expires))
	recordWith(t, "10.96.0.4/24", "cli-held", ns, "cron-1", "", estuaryv1.OwnerReference{Kind: "CronJob", Name: "cron"}, estuaryv1.IPInstanceRetained, retained(nil, nil))
	p := runningPod(t, ns, "web-7d9-new", nil, "10.96.0.5")
	recordWith(t, "10.96.0.5/24", "cli-held", ns, p.Name, string(p.UID), web, estuaryv1.IPInstanceBound, func(ipi *estuaryv1.IPInstance) {
		ipi.Spec.Retention = &estuaryv1.Retention{TTL: &metav1.Duration{Duration: hour}}
	})
	if out, err := run(t, "", "-n", ns, "reserve", "10.96.0.3", "--for", "deploy/web"); err != nil {
		t.Fatalf("reserve: %v\n%s", err, out)
	}
	return ns, expires
}

func getIPOut(t *testing.T, addr string) string {
	t.Helper()
	out, err := run(t, "", "get", "ip", addr)
	if err != nil {
		t.Fatalf("get ip %s: %v\n%s", addr, err, out)
	}
	return out
}

// get ip shows a record's expiry, retention and reservation, for Retained,
// Reserved and Bound records of any owner kind.
func TestGetIPShowsRetainedAndReserved(t *testing.T) {
	ns, expires := heldFixture(t)
	out := getIPOut(t, "10.96.0.2")
	requireField(t, out, "Phase", "Retained")
	requireField(t, out, "Pod", ns+"/web-7d9-old (no pod now)")
	requireRow(t, out, "Expires:", expires.UTC().Format(time.RFC3339), "(in ")
	requireField(t, out, "Retention", "ttl 1h0m0s")
	requireField(t, out, "Reserved", "no")
	requireField(t, out, "Held", "for the next pod of Deployment "+ns+"/web, until "+expires.UTC().Format(time.RFC3339))

	out = getIPOut(t, "10.96.0.3")
	requireField(t, out, "Phase", "Reserved")
	requireField(t, out, "Pod", "none yet")
	requireField(t, out, "Expires", "never")
	requireField(t, out, "Retention", "none")
	requireField(t, out, "Reserved", "yes")
	requireField(t, out, "Held", "reserved for the next pod of Deployment "+ns+"/web, until released by hand")

	out = getIPOut(t, "10.96.0.4")
	requireField(t, out, "Expires", "never")
	requireField(t, out, "Retention", "kept without time limit (Never)")

	out = getIPOut(t, "10.96.0.5")
	requireField(t, out, "Expires", "-")
	requireField(t, out, "Held", "while pod web-7d9-new exists, then retained for Deployment "+ns+"/web")
}

// get workload lists the records that name the workload as their owner,
// Retained and Reserved ones too, and no other owner's.
func TestGetWorkloadListsRetainedAndReserved(t *testing.T) {
	ns, expires := heldFixture(t)
	out, err := run(t, "", "-n", ns, "get", "workload", "deploy/web")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, lineWith(out, "ADDRESS"), "PHASE", "RESERVED", "EXPIRES")
	requireRow(t, out, "10.96.0.2/24", "web-7d9-old", "Retained", "no", expires.UTC().Format(time.RFC3339))
	requireRow(t, out, "10.96.0.3/24", "Reserved", "yes", "never")
	requireRow(t, out, "10.96.0.5/24", "web-7d9-new", "n1", "Bound")
	if strings.Contains(out, "10.96.0.4") {
		t.Errorf("the deployment's addresses include the CronJob's:\n%s", out)
	}
	out, err = run(t, "", "-n", ns, "get", "workload", "cj/cron")
	if err != nil {
		t.Fatal(err)
	}
	requireRow(t, out, "10.96.0.4/24", "cron-1", "Retained", "never")
}

// release takes Reserved and Retained records after asking (the Retained
// one even while its StatefulSet exists), and refuses while a running pod
// of the name a retained record keeps uses it.
func TestReleaseReservedAndRetained(t *testing.T) {
	ns := namespace(t)
	resSubnet(t)
	if out, err := run(t, "", "-n", ns, "reserve", "10.94.0.5", "--for", "sts/db"); err != nil {
		t.Fatalf("reserve: %v\n%s", err, out)
	}
	out, err := run(t, "n\n", "release", "10.94.0.5")
	if err == nil || !strings.Contains(err.Error(), "not confirmed") {
		t.Errorf("release answered no: %v", err)
	}
	requireIn(t, out, "this ends the reservation for StatefulSet "+ns+"/db")
	getRecord(t, "10.94.0.5")
	out, err = run(t, "y\n", "release", "10.94.0.5")
	if err != nil {
		t.Fatalf("release of a reserved address: %v\n%s", err, out)
	}
	requireIn(t, out, "released 10.94.0.5/24")
	if err := k8s.Get(bg(), client.ObjectKey{Name: "10.94.0.5"}, &estuaryv1.IPInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("released reservation still there: %v", err)
	}

	statefulSet(t, ns, "db")
	db := estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db"}
	recordWith(t, "10.94.0.6/24", "cli-res", ns, "db-1", "", db, estuaryv1.IPInstanceRetained, retained(nil, nil))
	out, err = run(t, "yes\n", "release", "10.94.0.6")
	if err != nil {
		t.Fatalf("release of a retained address: %v\n%s", err, out)
	}
	requireIn(t, out, "the next pod of StatefulSet "+ns+"/db gets another address", "released 10.94.0.6/24")

	runningPod(t, ns, "db-0", nil, "10.94.0.7")
	recordWith(t, "10.94.0.7/24", "cli-res", ns, "db-0", "", db, estuaryv1.IPInstanceRetained, retained(nil, nil))
	if _, err := run(t, "y\n", "release", "10.94.0.7"); err == nil || !strings.Contains(err.Error(), "pod "+ns+"/db-0") {
		t.Errorf("release of an address a running pod of its name takes: %v, want a refusal naming the pod", err)
	}
	getRecord(t, "10.94.0.7")
}

func statefulSet(t *testing.T, ns, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	create(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}}})
}

// check finds nothing wrong with Reserved records and Retained ones not
// expired (or expired less than ipamcheck.ExpiryGrace ago), reports a
// Retained record long expired, and repair releases it and nothing else.
func TestCheckClassifiesHeldRecords(t *testing.T) {
	ns := namespace(t)
	subnetWithStatus(t, "cli-chk2", "10.98.0.0/24", 254, 0)
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(bg(), &estuaryv1.IPInstance{}, client.MatchingLabels{estuaryv1.LabelSubnet: "cli-chk2"})
	})
	now := time.Now()
	soon, lately, long := now.Add(time.Hour), now.Add(-time.Minute), now.Add(-time.Hour)
	recordWith(t, "10.98.0.2/24", "cli-chk2", ns, "web-a", "", estuaryv1.OwnerReference{Kind: "Deployment", Name: "web"}, estuaryv1.IPInstanceRetained, retained(nil, &soon))
	recordWith(t, "10.98.0.3/24", "cli-chk2", ns, "cron-1", "", estuaryv1.OwnerReference{Kind: "CronJob", Name: "cron"}, estuaryv1.IPInstanceRetained, retained(nil, nil))
	recordWith(t, "10.98.0.4/24", "cli-chk2", ns, "ds-x", "", estuaryv1.OwnerReference{Kind: "DaemonSet", Name: "ds"}, estuaryv1.IPInstanceRetained, retained(nil, &lately))
	recordWith(t, "10.98.0.5/24", "cli-chk2", ns, "job-1", "", estuaryv1.OwnerReference{Kind: "Job", Name: "job"}, estuaryv1.IPInstanceRetained, retained(nil, &long))
	if out, err := run(t, "", "-n", ns, "reserve", "10.98.0.6-10.98.0.7", "--for", "sts/db"); err != nil {
		t.Fatalf("reserve: %v\n%s", err, out)
	}
	setUsed(t, "cli-chk2", 254, 6)

	out, err := run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms")
	if ExitCode(err) != 3 {
		t.Fatalf("check with an expired retention: exit %d (%v), want 3", ExitCode(err), err)
	}
	if got := findingsAbout(t, out, ns, "cli-chk2"); got != "ExpiredRetention 10.98.0.5/24 "+ns+"/job-1" {
		t.Errorf("findings about this test's objects: %s", got)
	}
	text, _ := run(t, "", "check", "--grace", "0s", "--interval", "100ms")
	requireRow(t, text, "10.98.0.5/24", "ExpiredRetention", "expired retention not released")

	report := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(report, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "", "repair", "--from-report", report, "--yes")
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	requireIn(t, out, "released 10.98.0.5/24")
	for name, want := range map[string]bool{"10.98.0.2": true, "10.98.0.3": true, "10.98.0.4": true, "10.98.0.5": false, "10.98.0.6": true, "10.98.0.7": true} {
		err := k8s.Get(bg(), client.ObjectKey{Name: name}, &estuaryv1.IPInstance{})
		if exists := err == nil; exists != want {
			t.Errorf("after repair ipinstance %s exists=%t, want %t (%v)", name, exists, want, err)
		}
	}
}

// findingsAbout reads a check -o json report and lists "kind address pod"
// of the findings about a subnet or the pods of a namespace.
func findingsAbout(t *testing.T, report, ns, subnet string) string {
	t.Helper()
	var r ipamcheck.Report
	if err := json.Unmarshal([]byte(report), &r); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, report)
	}
	var out []string
	for _, f := range r.Findings {
		if f.Subnet == subnet || strings.HasPrefix(f.Pod, ns+"/") {
			out = append(out, string(f.Kind)+" "+f.Address+" "+f.Pod)
		}
	}
	return strings.Join(out, ", ")
}
