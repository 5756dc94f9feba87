package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/ipamcheck"
)

// repair judges a TwoAddresses finding again by check's own rule: a record
// whose twin was released, a record no longer Bound, and the records of a
// pod that uses none of them are left alone; only the record of a pod that
// still holds two and uses the other one is released.
func TestRepairRechecksTwoAddressesByCheckRule(t *testing.T) {
	ns := namespace(t)
	subnetWithStatus(t, "cli-two", "10.99.0.0/24", 254, 8)
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(bg(), &estuaryv1.IPInstance{}, client.MatchingLabels{estuaryv1.LabelSubnet: "cli-two"})
	})
	twins := func(name string, uses string, addrs ...string) *corev1.Pod {
		p := runningPod(t, ns, name, nil, uses)
		for _, a := range addrs {
			recordFor(t, a+"/24", "cli-two", ns, p.Name, string(p.UID), podOwner(p), estuaryv1.IPInstanceBound)
		}
		return p
	}
	twins("twin-gone", "10.99.0.2", "10.99.0.2", "10.99.0.3")
	twins("not-bound", "10.99.0.4", "10.99.0.4", "10.99.0.5")
	twins("uses-neither", "10.99.0.8", "10.99.0.6", "10.99.0.7")
	twins("still-two", "10.99.0.9", "10.99.0.9", "10.99.0.10")

	out, err := run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms")
	if ExitCode(err) != 3 {
		t.Fatalf("check: exit %d (%v), want 3\n%s", ExitCode(err), err, out)
	}
	var r ipamcheck.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	if r.Grace != "0s" {
		t.Errorf("report grace %q, want 0s", r.Grace)
	}
	var two []string
	for _, f := range r.Findings {
		if f.Kind == ipamcheck.TwoAddresses && strings.HasPrefix(f.Pod, ns+"/") {
			two = append(two, f.Address)
		}
	}
	if got, want := strings.Join(two, " "), "10.99.0.10/24 10.99.0.2/24 10.99.0.3/24 10.99.0.4/24 10.99.0.5/24 10.99.0.6/24 10.99.0.7/24 10.99.0.9/24"; got != want {
		t.Fatalf("TwoAddresses findings %s, want %s", got, want)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(report, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}

	// After the check: twin-gone's used record is released, so it holds
	// one address; not-bound's unused record is no longer Bound.
	gone := &estuaryv1.IPInstance{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "10.99.0.2"}, gone); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(bg(), gone); err != nil {
		t.Fatal(err)
	}
	nb := &estuaryv1.IPInstance{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "10.99.0.5"}, nb); err != nil {
		t.Fatal(err)
	}
	nb.Status.Phase = estuaryv1.IPInstanceRetained
	if err := k8s.Update(bg(), nb); err != nil {
		t.Fatal(err)
	}

	out, err = run(t, "", "repair", "--from-report", report, "--yes")
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	requireIn(t, out,
		"no longer TwoAddresses: ipinstance 10.99.0.3 is Bound, and "+ns+"/twin-gone holds fewer than two Bound records",
		"no longer TwoAddresses: ipinstance 10.99.0.4 is Bound, and "+ns+"/not-bound holds fewer than two",
		"no longer TwoAddresses: ipinstance 10.99.0.5 is Retained",
		"pod "+ns+"/still-two uses this address")
	if n := strings.Count(out, "pod "+ns+"/uses-neither uses none of its other records of this family (it reports 10.99.0.8)"); n != 2 {
		t.Errorf("uses-neither's two records left alone %d times, want 2:\n%s", n, out)
	}
	requireIn(t, out, "released 10.99.0.10/24")
	if n := strings.Count(out, "released "); n != 1 {
		t.Errorf("repair released %d records, want 1:\n%s", n, out)
	}
	for name, want := range map[string]bool{
		"10.99.0.3": true, "10.99.0.4": true, "10.99.0.5": true, "10.99.0.6": true, "10.99.0.7": true,
		"10.99.0.9": true, "10.99.0.10": false,
	} {
		err := k8s.Get(bg(), client.ObjectKey{Name: name}, &estuaryv1.IPInstance{})
		if exists := err == nil; exists != want {
			t.Errorf("after repair ipinstance %s exists=%t, want %t (%v)", name, exists, want, err)
		}
	}
}
