package cli

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// dualSubnets creates an IPv4 and an IPv6 subnet of one network, with
// status.used set as given.
func dualSubnets(t *testing.T, v4, cidr4, v6, cidr6 string, used4, used6 int64) {
	t.Helper()
	subnetWithStatus(t, v4, cidr4, 254, used4)
	sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: v6},
		Spec: estuaryv1.SubnetSpec{Network: "net-" + v4, Range: estuaryv1.AddressRange{Version: 6, CIDR: cidr6}}}
	create(t, sn)
	setUsed(t, v6, 1<<16, used6)
}

// dualRecord creates the record of ip, as recordWith does, in the
// network of v4 (the IPv6 subnet's too), saying its pod has count
// addresses when Bound.
func dualRecord(t *testing.T, ip, subnet, v4, ns, pod, uid string, owner estuaryv1.OwnerReference, phase estuaryv1.IPInstancePhase, count string) {
	t.Helper()
	recordWith(t, ip, subnet, ns, pod, uid, owner, phase, func(ipi *estuaryv1.IPInstance) {
		ipi.Spec.Network = "net-" + v4
		if ip[0] == 'f' {
			ipi.Spec.Address.Version = 6
		}
		if count != "" {
			ipi.Annotations = map[string]string{estuaryv1.AnnotationAddresses: count}
		}
		if phase == estuaryv1.IPInstanceRetained {
			ipi.Spec.Binding.NodeName = ""
			ipi.Spec.Binding.StatefulOrdinal = ptr.To[int32](0)
		}
	})
}

// check is clean on a dual-stack cluster: a running pod with a Bound
// record of each family, both saying it has two addresses, and a
// StatefulSet ordinal's kept pair of both families.
func TestCheckCleanOnDualStack(t *testing.T) {
	ns := namespace(t)
	dualSubnets(t, "cli-ds4", "10.97.7.0/24", "cli-ds6", "fd00:97:7::/64", 2, 2)
	p := runningPod(t, ns, "dual", nil, "10.97.7.2", "fd00:97:7::2")
	dualRecord(t, "10.97.7.2/24", "cli-ds4", "cli-ds4", ns, p.Name, string(p.UID), podOwner(p), estuaryv1.IPInstanceBound, "2")
	dualRecord(t, "fd00:97:7::2/64", "cli-ds6", "cli-ds4", ns, p.Name, string(p.UID), podOwner(p), estuaryv1.IPInstanceBound, "2")
	sts := estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db", UID: "s-uid"}
	dualRecord(t, "10.97.7.3/24", "cli-ds4", "cli-ds4", ns, "db-0", "", sts, estuaryv1.IPInstanceRetained, "")
	dualRecord(t, "fd00:97:7::3/64", "cli-ds6", "cli-ds4", ns, "db-0", "", sts, estuaryv1.IPInstanceRetained, "")

	out, err := run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms", "--skip-nodes")
	if got := findingsAbout(t, out, ns, "cli-ds4") + findingsAbout(t, out, ns, "cli-ds6"); got != "" {
		t.Errorf("findings about a clean dual-stack pod and kept pair: %s", got)
	}
	if ExitCode(err) != 0 {
		t.Errorf("check of a clean dual-stack cluster: exit %d (%v)\n%s", ExitCode(err), err, out)
	}
}

// A dual-stack pod that lost its IPv6 record is reported: MissingFamily
// from its remaining record, which still says the pod has two addresses,
// and, for a pod whose status shows the IPv6 address, Missing for that
// address. A pod whose node still waits for the lost record reports no
// address, so MissingFamily alone finds it. repair releases nothing for
// either: the manager records the missing family again.
func TestCheckReportsADualStackPodMissingAFamily(t *testing.T) {
	ns := namespace(t)
	dualSubnets(t, "cli-dsl4", "10.97.8.0/24", "cli-dsl6", "fd00:97:8::/64", 2, 0)
	up := runningPod(t, ns, "up", nil, "10.97.8.2", "fd00:97:8::2")
	dualRecord(t, "10.97.8.2/24", "cli-dsl4", "cli-dsl4", ns, up.Name, string(up.UID), podOwner(up), estuaryv1.IPInstanceBound, "2")
	waiting := runningPod(t, ns, "waiting", nil)
	dualRecord(t, "10.97.8.3/24", "cli-dsl4", "cli-dsl4", ns, waiting.Name, string(waiting.UID), podOwner(waiting), estuaryv1.IPInstanceBound, "2")

	out, err := run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms", "--skip-nodes")
	if ExitCode(err) != 3 {
		t.Fatalf("check with a pod missing a family: exit %d (%v), want 3\n%s", ExitCode(err), err, out)
	}
	want := "Missing fd00:97:8::2 " + ns + "/up, MissingFamily 10.97.8.2/24 " + ns + "/up, MissingFamily 10.97.8.3/24 " + ns + "/waiting"
	if got := findingsAbout(t, out, ns, "cli-dsl4"); got != want {
		t.Errorf("findings:\n got %s\nwant %s", got, want)
	}
	text, _ := run(t, "", "check", "--grace", "0s", "--interval", "100ms", "--skip-nodes")
	t.Logf("kubectl estuary check --skip-nodes:\n%s", text)
	requireRow(t, text, ns+"/waiting", "MissingFamily", "has 1 of the 2 addresses its records promise", "no IPv6 record")

	report := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(report, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	repaired, err := run(t, "", "repair", "--from-report", report, "--yes")
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, repaired)
	}
	requireIn(t, repaired, "left alone: MissingFamily", "nothing to release")
}
