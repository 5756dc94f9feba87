package ipamcheck

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

var (
	now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	old = metav1.NewTime(now.Add(-time.Hour))
)

func pod(ns, name, uid string, ips ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), CreationTimestamp: old},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func record(ip, subnet, ns, podName, uid string, phase estuaryv1.IPInstancePhase) estuaryv1.IPInstance {
	p := netip.MustParsePrefix(ip)
	return estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(p.Addr()), UID: types.UID("r-" + ip), CreationTimestamp: old},
		Spec: estuaryv1.IPInstanceSpec{Subnet: subnet, Address: estuaryv1.InstanceAddress{IP: ip},
			Binding: estuaryv1.Binding{Namespace: ns, PodName: podName, PodUID: uid}},
		Status: estuaryv1.IPInstanceStatus{Phase: phase},
	}
}

func subnet(name, cidr string, used int64) estuaryv1.Subnet {
	return estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   estuaryv1.SubnetSpec{Range: estuaryv1.AddressRange{CIDR: cidr}},
		Status: estuaryv1.SubnetStatus{Used: used}}
}

func snapshot(records []estuaryv1.IPInstance, pods []corev1.Pod, subnets ...estuaryv1.Subnet) Snapshot {
	return Snapshot{Records: records, Pods: pods, Subnets: subnets, Taken: now, Grace: time.Minute}
}

func kinds(r Report) string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, string(f.Kind)+" "+f.Address+" "+f.Pod+" "+f.Subnet)
	}
	return strings.Join(out, "; ")
}

func TestCleanClusterHasNoFindings(t *testing.T) {
	r := Check(snapshot(
		[]estuaryv1.IPInstance{
			record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound),
			record("fd00::2/64", "s6", "a", "web", "u1", estuaryv1.IPInstanceBound),
			record("10.0.0.3/24", "s4", "a", "db-0", "", estuaryv1.IPInstanceRetained),
		},
		[]corev1.Pod{pod("a", "web", "u1", "10.0.0.2", "fd00::2"), pod("kube-system", "host", "u9", "192.168.0.5")},
		subnet("s4", "10.0.0.0/24", 2), subnet("s6", "fd00::/64", 1)))
	if len(r.Findings) != 0 {
		t.Fatalf("findings on a clean cluster: %s", kinds(r))
	}
}

func TestEveryKindIsFound(t *testing.T) {
	finished := pod("a", "job", "u4", "10.0.0.7")
	finished.Status.Phase = corev1.PodSucceeded
	misnamed := record("10.0.0.8/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceRetained)
	misnamed.Name = "web-ip"
	r := Check(snapshot(
		[]estuaryv1.IPInstance{
			record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound),
			record("10.0.0.3/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound),
			record("10.0.0.4/24", "s4", "a", "gone", "u2", estuaryv1.IPInstanceBound),
			record("10.0.0.5/24", "s4", "a", "again", "old-uid", estuaryv1.IPInstanceBound),
			record("10.0.0.7/24", "s4", "a", "job", "u4", estuaryv1.IPInstanceBound),
			misnamed,
		},
		[]corev1.Pod{
			pod("a", "web", "u1", "10.0.0.2"),
			pod("a", "again", "new-uid", "10.0.0.5"),
			pod("a", "norecord", "u5", "10.0.0.9"),
			pod("b", "twin", "u6", "10.0.0.9"),
			finished,
		},
		subnet("s4", "10.0.0.0/24", 3)))
	want := []string{
		"CountDrift   s4",
		"Leaked 10.0.0.4/24 a/gone s4",
		"Leaked 10.0.0.5/24 a/again s4",
		"Leaked 10.0.0.7/24 a/job s4",
		"Misnamed 10.0.0.8/24 a/web s4",
		"Missing 10.0.0.5 a/again ",
		"Missing 10.0.0.9 a/norecord ",
		"Missing 10.0.0.9 b/twin ",
		"SharedAddress 10.0.0.9 a/norecord ",
		"SharedAddress 10.0.0.9 b/twin ",
		"TwoAddresses 10.0.0.2/24 a/web s4",
		"TwoAddresses 10.0.0.3/24 a/web s4",
	}
	if got := kinds(r); got != strings.Join(want, "; ") {
		t.Errorf("findings:\n got  %s\n want %s", got, strings.Join(want, "; "))
	}
	if r.Count(Leaked) != 3 || r.Count(Missing) != 3 {
		t.Errorf("counts: leaked %d missing %d", r.Count(Leaked), r.Count(Missing))
	}
	for _, f := range r.Findings {
		if f.Kind == Leaked && (f.RecordUID == "" || !strings.Contains(f.Detail, f.Record)) {
			t.Errorf("leak finding does not name its record and UID: %+v", f)
		}
	}
}

// Objects younger than the grace period are not judged: an allocation or a
// release may be half done.
func TestYoungObjectsAreNotJudged(t *testing.T) {
	rec := record("10.0.0.4/24", "s4", "a", "starting", "u2", estuaryv1.IPInstanceBound)
	rec.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
	p := pod("a", "fresh", "u3", "10.0.0.5")
	p.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
	r := Check(snapshot([]estuaryv1.IPInstance{rec}, []corev1.Pod{p}, subnet("s4", "10.0.0.0/24", 1)))
	if len(r.Findings) != 0 {
		t.Fatalf("young objects judged: %s", kinds(r))
	}
}

// Stable keeps only what two checks found about the same objects.
func TestStableKeepsWhatPersists(t *testing.T) {
	leak := record("10.0.0.4/24", "s4", "a", "gone", "u2", estuaryv1.IPInstanceBound)
	first := Check(snapshot([]estuaryv1.IPInstance{leak}, nil, subnet("s4", "10.0.0.0/24", 0)))
	replaced := leak
	replaced.UID = "r-other"
	later := Check(snapshot([]estuaryv1.IPInstance{leak}, nil, subnet("s4", "10.0.0.0/24", 2)))
	if got := kinds(Stable(first, later)); got != "CountDrift   s4; Leaked 10.0.0.4/24 a/gone s4" {
		t.Errorf("stable findings: %s", got)
	}
	other := Check(snapshot([]estuaryv1.IPInstance{replaced}, nil, subnet("s4", "10.0.0.0/24", 1)))
	if got := kinds(Stable(first, other)); got != "" {
		t.Errorf("a record replaced between the checks (new UID) is still reported: %s", got)
	}
}

// held is a record no pod uses: Retained for the owner with the last pod's
// name, or Reserved (podName may be empty).
func held(ip, ns, podName string, phase estuaryv1.IPInstancePhase, owner estuaryv1.OwnerReference, expiresAt *time.Time) estuaryv1.IPInstance {
	r := record(ip, "s4", ns, podName, "", phase)
	r.Spec.Binding.Owner = owner
	r.Spec.Reserved = phase == estuaryv1.IPInstanceReserved
	if expiresAt != nil {
		r.Status.ExpiresAt = &metav1.Time{Time: *expiresAt}
	}
	return r
}

func at(d time.Duration) *time.Time {
	t := now.Add(d)
	return &t
}

// Reserved records, and Retained records of any owner kind whose expiry is
// unset, in the future or less than ExpiryGrace past, are not findings.
func TestReservedAndUnexpiredRetainedAreLegitimate(t *testing.T) {
	deploy := estuaryv1.OwnerReference{Kind: "Deployment", Name: "web", UID: "d1"}
	reservedBound := record("10.0.0.7/24", "s4", "a", "web-1", "u1", estuaryv1.IPInstanceBound)
	reservedBound.Spec.Reserved = true
	r := Check(snapshot(
		[]estuaryv1.IPInstance{
			held("10.0.0.2/24", "a", "", estuaryv1.IPInstanceReserved, estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db"}, nil),
			held("10.0.0.3/24", "a", "web-0", estuaryv1.IPInstanceReserved, deploy, nil),
			held("10.0.0.4/24", "a", "web-2", estuaryv1.IPInstanceRetained, deploy, at(time.Hour)),
			held("10.0.0.5/24", "a", "cron-1", estuaryv1.IPInstanceRetained, estuaryv1.OwnerReference{Kind: "CronJob", Name: "cron"}, nil),
			held("10.0.0.6/24", "a", "ds-x", estuaryv1.IPInstanceRetained, estuaryv1.OwnerReference{Kind: "DaemonSet", Name: "ds"}, at(-ExpiryGrace)),
			reservedBound,
		},
		[]corev1.Pod{pod("a", "web-1", "u1", "10.0.0.7")},
		subnet("s4", "10.0.0.0/24", 6)))
	if len(r.Findings) != 0 {
		t.Fatalf("findings about reserved and retained records: %s", kinds(r))
	}
}

// A Retained record whose expiry is more than ExpiryGrace past is reported
// as ExpiredRetention, naming the record, its UID and its owner.
func TestExpiredRetentionIsFound(t *testing.T) {
	rec := held("10.0.0.4/24", "a", "web-2", estuaryv1.IPInstanceRetained, estuaryv1.OwnerReference{Kind: "Deployment", Name: "web"}, at(-ExpiryGrace-time.Second))
	r := Check(snapshot([]estuaryv1.IPInstance{rec}, nil, subnet("s4", "10.0.0.0/24", 1)))
	if got := kinds(r); got != "ExpiredRetention 10.0.0.4/24 a/web-2 s4" {
		t.Fatalf("findings: %s", got)
	}
	f := r.Findings[0]
	if f.Record != "10.0.0.4" || f.RecordUID != string(rec.UID) {
		t.Errorf("finding names record %s uid %s, want 10.0.0.4 uid %s", f.Record, f.RecordUID, rec.UID)
	}
	for _, w := range []string{"expired retention not released", "Deployment a/web", "5m1s ago"} {
		if !strings.Contains(f.Detail, w) {
			t.Errorf("detail %q lacks %q", f.Detail, w)
		}
	}
}

// Judge applies the same rules to one record that Check applies to all.
func TestJudgeOneRecord(t *testing.T) {
	sts := estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db"}
	live := pod("a", "db-0", "u1")
	for _, c := range []struct {
		name string
		rec  estuaryv1.IPInstance
		pod  *corev1.Pod
		want Kind
	}{
		{"bound, pod runs", record("10.0.0.2/24", "s4", "a", "db-0", "u1", estuaryv1.IPInstanceBound), &live, ""},
		{"bound, pod gone", record("10.0.0.2/24", "s4", "a", "db-0", "u1", estuaryv1.IPInstanceBound), nil, Leaked},
		{"bound, other pod", record("10.0.0.2/24", "s4", "a", "db-0", "u0", estuaryv1.IPInstanceBound), &live, Leaked},
		{"reserved, no pod", held("10.0.0.2/24", "a", "", estuaryv1.IPInstanceReserved, sts, nil), nil, ""},
		{"retained, never expires", held("10.0.0.2/24", "a", "db-0", estuaryv1.IPInstanceRetained, sts, nil), nil, ""},
		{"retained, expires later", held("10.0.0.2/24", "a", "db-0", estuaryv1.IPInstanceRetained, sts, at(time.Minute)), nil, ""},
		{"retained, expired within grace", held("10.0.0.2/24", "a", "db-0", estuaryv1.IPInstanceRetained, sts, at(-time.Minute)), nil, ""},
		{"retained, expired past grace", held("10.0.0.2/24", "a", "db-0", estuaryv1.IPInstanceRetained, sts, at(-time.Hour)), nil, ExpiredRetention},
	} {
		if got, detail := Judge(&c.rec, c.pod, now); got != c.want || (got != "" && !strings.Contains(detail, c.rec.Name)) {
			t.Errorf("%s: Judge = %q (%s), want %q with the record's name", c.name, got, detail, c.want)
		}
	}
}

// Recheck finds a finding again only by the rule Check found it with: a
// TwoAddresses finding needs the pod to still hold two Bound records of
// the family that Check counts, and returns them; a Leaked one needs the
// record to be leaked still.
func TestRecheckAppliesCheckRules(t *testing.T) {
	a := record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound)
	b := record("10.0.0.3/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound)
	v6 := record("fd00::3/64", "s6", "a", "web", "u1", estuaryv1.IPInstanceBound)
	web := pod("a", "web", "u1", "10.0.0.2")
	first := Check(snapshot([]estuaryv1.IPInstance{a, b, v6}, []corev1.Pod{web}))
	var fb Finding
	for _, f := range first.Findings {
		if f.Kind == TwoAddresses && f.Record == b.Name {
			fb = f
		}
	}
	if fb.Kind == "" {
		t.Fatalf("no TwoAddresses finding about %s: %s", b.Name, kinds(first))
	}
	if first.Grace != "1m0s" {
		t.Errorf("report grace %q, want the snapshot's 1m0s", first.Grace)
	}
	g, group, ok := Recheck(snapshot([]estuaryv1.IPInstance{a, b, v6}, []corev1.Pod{web}), fb)
	if !ok || g.RecordUID != string(b.UID) || len(group) != 2 || group[0].Name != a.Name || group[1].Name != b.Name {
		t.Errorf("Recheck of a standing finding: %v %+v %v", ok, g, group)
	}
	retained := b
	retained.Status.Phase = estuaryv1.IPInstanceRetained
	youngA := a
	youngA.UID, youngA.CreationTimestamp = "r-new", metav1.NewTime(now.Add(-time.Second))
	finished := web
	finished.Status.Phase = corev1.PodSucceeded
	replaced := b
	replaced.UID = "r-replaced"
	for name, s := range map[string]Snapshot{
		"twin released":           snapshot([]estuaryv1.IPInstance{b, v6}, []corev1.Pod{web}),
		"no longer Bound":         snapshot([]estuaryv1.IPInstance{a, retained}, []corev1.Pod{web}),
		"twin younger than grace": snapshot([]estuaryv1.IPInstance{youngA, b}, []corev1.Pod{web}),
		"pod gone":                snapshot([]estuaryv1.IPInstance{a, b}, nil),
		"pod finished":            snapshot([]estuaryv1.IPInstance{a, b}, []corev1.Pod{finished}),
		"record replaced":         snapshot([]estuaryv1.IPInstance{a, replaced}, []corev1.Pod{web}),
	} {
		if _, _, ok := Recheck(s, fb); ok {
			t.Errorf("%s: Recheck still finds %s", name, fb)
		}
	}

	leak := record("10.0.0.4/24", "s4", "a", "gone", "u2", estuaryv1.IPInstanceBound)
	fl := Check(snapshot([]estuaryv1.IPInstance{leak}, nil)).Findings[0]
	if _, _, ok := Recheck(snapshot([]estuaryv1.IPInstance{leak}, nil), fl); !ok {
		t.Errorf("Recheck of a standing leak: not found")
	}
	if _, _, ok := Recheck(snapshot([]estuaryv1.IPInstance{leak}, []corev1.Pod{pod("a", "gone", "u2")}), fl); ok {
		t.Errorf("Recheck of a leak whose pod is back: still found")
	}
}

// A dual-stack pod whose records promise two addresses is clean with one
// record of each family, and MissingFamily when one family's record is
// gone; a pod promising one address, a record with no count, and a pod
// younger than the grace are not judged short.
func TestMissingFamily(t *testing.T) {
	counted := func(ipi estuaryv1.IPInstance, n string) estuaryv1.IPInstance {
		ipi.Annotations = map[string]string{estuaryv1.AnnotationAddresses: n}
		return ipi
	}
	young := pod("a", "new", "u5")
	young.CreationTimestamp = metav1.NewTime(now)
	r := Check(snapshot(
		[]estuaryv1.IPInstance{
			counted(record("10.0.0.2/24", "s4", "a", "dual", "u1", estuaryv1.IPInstanceBound), "2"),
			counted(record("fd00::2/64", "s6", "a", "dual", "u1", estuaryv1.IPInstanceBound), "2"),
			counted(record("fd00::3/64", "s6", "a", "short", "u2", estuaryv1.IPInstanceBound), "2"),
			counted(record("10.0.0.4/24", "s4", "a", "single", "u3", estuaryv1.IPInstanceBound), "1"),
			record("10.0.0.5/24", "s4", "a", "uncounted", "u4", estuaryv1.IPInstanceBound),
			counted(record("10.0.0.6/24", "s4", "a", "new", "u5", estuaryv1.IPInstanceBound), "2"),
		},
		[]corev1.Pod{pod("a", "dual", "u1", "10.0.0.2", "fd00::2"), pod("a", "short", "u2"), pod("a", "single", "u3", "10.0.0.4"),
			pod("a", "uncounted", "u4", "10.0.0.5"), young},
		subnet("s4", "10.0.0.0/24", 4), subnet("s6", "fd00::/64", 2)))
	if got := kinds(r); got != "MissingFamily fd00::3/64 a/short " {
		t.Fatalf("findings: %q, want MissingFamily of a/short alone", got)
	}
	if d := r.Findings[0].Detail; !strings.Contains(d, "1 of the 2 addresses") || !strings.Contains(d, "no IPv4 record") {
		t.Errorf("detail %q does not say which family is missing", d)
	}
}
