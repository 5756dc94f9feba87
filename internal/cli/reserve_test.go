package cli

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// reserveSubnet creates subnet name with its range, in network, and
// deletes every record of it when the test ends.
func reserveSubnet(t *testing.T, name, network string, r estuaryv1.AddressRange) {
	t.Helper()
	create(t, &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: estuaryv1.SubnetSpec{Network: network, Range: r}})
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(bg(), &estuaryv1.IPInstance{}, client.MatchingLabels{estuaryv1.LabelSubnet: name})
	})
}

// vlanNetwork creates an Underlay VLAN network with VLAN id netID.
func vlanNetwork(t *testing.T, name string, netID int64) {
	t.Helper()
	create(t, &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, NetID: ptr.To(netID), NodeSelector: map[string]string{"rack": name}}})
}

// recordsOf names the records of a subnet, sorted.
func recordsOf(t *testing.T, subnet string) []string {
	t.Helper()
	var list estuaryv1.IPInstanceList
	if err := k8s.List(bg(), &list, client.MatchingLabels{estuaryv1.LabelSubnet: subnet}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ipi := range list.Items {
		out = append(out, ipi.Name)
	}
	slices.Sort(out)
	return out
}

func getRecord(t *testing.T, name string) *estuaryv1.IPInstance {
	t.Helper()
	ipi := &estuaryv1.IPInstance{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, ipi); err != nil {
		t.Fatalf("get ipinstance %s: %v", name, err)
	}
	return ipi
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}}}
	create(t, d)
	return d
}

// resSubnet is 10.94.0.0/24 in VLAN 100 with a gateway, a window
// [.2, .200] and the excluded range .50-.59.
func resSubnet(t *testing.T) {
	t.Helper()
	vlanNetwork(t, "net-cli-res", 100)
	reserveSubnet(t, "cli-res", "net-cli-res", estuaryv1.AddressRange{Version: 4, CIDR: "10.94.0.0/24", Gateway: "10.94.0.1",
		Start: "10.94.0.2", End: "10.94.0.200", ExcludeIPs: []estuaryv1.AddressOrRange{"10.94.0.50-10.94.0.59"}})
}

// A reservation records the address as the manager would, Reserved for
// the owner with its UID; a repeat for the same owner changes nothing and
// succeeds; another owner is refused, told who holds it.
func TestReserveOneAddress(t *testing.T) {
	ns := namespace(t)
	resSubnet(t)
	d := deployment(t, ns, "web")

	out, err := run(t, "", "-n", ns, "reserve", "10.94.0.7", "--for", "deploy/web")
	if err != nil {
		t.Fatalf("reserve: %v\n%s", err, out)
	}
	requireIn(t, out, "reserved 10.94.0.7/24 for Deployment "+ns+"/web")
	ipi := getRecord(t, "10.94.0.7")
	want := estuaryv1.IPInstanceSpec{Network: "net-cli-res", Subnet: "cli-res",
		Address:  estuaryv1.InstanceAddress{IP: "10.94.0.7/24", Version: 4, Gateway: "10.94.0.1", NetID: ptr.To[int64](100)},
		Binding:  estuaryv1.Binding{Namespace: ns, Owner: estuaryv1.OwnerReference{Kind: "Deployment", Name: "web", UID: string(d.UID)}},
		Reserved: true}
	if !reflect.DeepEqual(ipi.Spec, want) {
		t.Errorf("reserved record spec:\n got  %+v (netID %v)\n want %+v (netID 100)", ipi.Spec, ptr.Deref(ipi.Spec.Address.NetID, -1), want)
	}
	if ipi.Status.Phase != estuaryv1.IPInstanceReserved || ipi.Status.ExpiresAt != nil {
		t.Errorf("reserved record status %+v, want phase Reserved without expiry", ipi.Status)
	}
	wantLabels := map[string]string{estuaryv1.LabelNamespace: ns, estuaryv1.LabelSubnet: "cli-res"}
	if fmt.Sprint(ipi.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("reserved record labels %v, want %v", ipi.Labels, wantLabels)
	}

	out, err = run(t, "", "-n", ns, "reserve", "10.94.0.7", "--for", "deployment/web")
	if err != nil {
		t.Fatalf("repeated reserve for the same owner: %v\n%s", err, out)
	}
	requireIn(t, out, "10.94.0.7/24 is already reserved for Deployment "+ns+"/web")
	if again := getRecord(t, "10.94.0.7"); again.UID != ipi.UID || again.ResourceVersion != ipi.ResourceVersion {
		t.Errorf("repeated reserve changed the record: uid %s rv %s, was uid %s rv %s", again.UID, again.ResourceVersion, ipi.UID, ipi.ResourceVersion)
	}

	_, err = run(t, "", "-n", ns, "reserve", "10.94.0.7", "--for", "sts/db")
	if err == nil || !strings.Contains(err.Error(), "already recorded") || !strings.Contains(err.Error(), "owner Deployment "+ns+"/web") {
		t.Errorf("reserve of an address reserved for another owner: %v, want a refusal naming Deployment %s/web", err, ns)
	}
}

// A range is recorded whole for an owner that does not exist yet (no UID).
func TestReserveRange(t *testing.T) {
	ns := namespace(t)
	resSubnet(t)
	out, err := run(t, "", "-n", ns, "reserve", "10.94.0.10-10.94.0.13", "--for", "sts/db")
	if err != nil {
		t.Fatalf("reserve range: %v\n%s", err, out)
	}
	requireIn(t, out, "StatefulSet "+ns+"/db does not exist now", "reserved 10.94.0.10/24", "reserved 10.94.0.13/24")
	if got := strings.Join(recordsOf(t, "cli-res"), " "); got != "10.94.0.10 10.94.0.11 10.94.0.12 10.94.0.13" {
		t.Fatalf("records after reserving .10-.13: %s", got)
	}
	for _, name := range recordsOf(t, "cli-res") {
		ipi := getRecord(t, name)
		o := ipi.Spec.Binding.Owner
		if o.Kind != "StatefulSet" || o.Name != "db" || o.UID != "" || ipi.Status.Phase != estuaryv1.IPInstanceReserved {
			t.Errorf("ipinstance %s: owner %+v phase %s, want StatefulSet db without uid, Reserved", name, o, ipi.Status.Phase)
		}
	}
}

// Every refusal names its reason and changes nothing; in a range one bad
// address refuses the whole range.
func TestReserveRefusals(t *testing.T) {
	ns := namespace(t)
	resSubnet(t)
	p := runningPod(t, ns, "busy", nil, "10.94.0.30")
	recordWith(t, "10.94.0.30/24", "cli-res", ns, p.Name, string(p.UID), podOwner(p), estuaryv1.IPInstanceBound, nil)
	before := recordsOf(t, "cli-res")
	for _, c := range []struct{ name, arg, want string }{
		{"not an address", "10.94.0", "not an IP address"},
		{"outside every subnet", "10.199.0.5", "outside every subnet"},
		{"network address", "10.94.0.0", "network address"},
		{"broadcast address", "10.94.0.255", "broadcast address"},
		{"gateway", "10.94.0.1", "gateway"},
		{"excluded", "10.94.0.55", "excluded range"},
		{"outside start-end", "10.94.0.220", "outside the allocatable range"},
		{"recorded for a pod", "10.94.0.30", "already recorded: ipinstance 10.94.0.30, Bound, owner Pod " + ns + "/busy, pod " + ns + "/busy"},
		{"range with a recorded address", "10.94.0.28-10.94.0.31", "10.94.0.30: already recorded"},
		{"range into the excluded ones", "10.94.0.48-10.94.0.52", "10.94.0.52: not assignable"},
		{"range over 256 addresses", "10.94.0.0-10.94.1.0", "more than 256 addresses"},
		{"range across families", "10.94.0.5-fd00::5", "mixes IPv4 and IPv6"},
		{"range backwards", "10.94.0.9-10.94.0.5", "10.94.0.9 comes after 10.94.0.5"},
	} {
		_, err := run(t, "", "-n", ns, "reserve", c.arg, "--for", "deploy/web")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: reserve %s: %v, want %q", c.name, c.arg, err, c.want)
		}
	}
	if _, err := run(t, "", "-n", ns, "reserve", "10.94.0.5", "--for", "deploy/web", "--subnet", "nope"); err == nil || !strings.Contains(err.Error(), "no subnet nope") {
		t.Errorf("reserve in a subnet that does not exist: %v", err)
	}
	if _, err := run(t, "", "-n", ns, "reserve", "10.94.0.5"); err == nil || !strings.Contains(err.Error(), `"for"`) {
		t.Errorf("reserve without --for: %v", err)
	}
	if after := recordsOf(t, "cli-res"); !slices.Equal(after, before) {
		t.Errorf("refused reserves changed the records: %v, were %v", after, before)
	}
}

// When CIDRs of two subnets hold an address, --subnet chooses; the record
// takes that subnet's prefix length. An IPv6 address is named with dashes.
func TestReserveChoosesSubnet(t *testing.T) {
	ns := namespace(t)
	reserveSubnet(t, "cli-wide", "net-a", estuaryv1.AddressRange{Version: 4, CIDR: "10.95.0.0/24"})
	reserveSubnet(t, "cli-narrow", "net-b", estuaryv1.AddressRange{Version: 4, CIDR: "10.95.0.0/25"})
	reserveSubnet(t, "cli-six", "net-a", estuaryv1.AddressRange{Version: 6, CIDR: "fd00:95::/64"})

	_, err := run(t, "", "-n", ns, "reserve", "10.95.0.5", "--for", "ds/agent")
	if err == nil || !strings.Contains(err.Error(), "several subnets") || !strings.Contains(err.Error(), "--subnet") {
		t.Errorf("reserve of an address two subnets hold: %v, want to be told to choose with --subnet", err)
	}
	if _, err := run(t, "", "-n", ns, "reserve", "10.95.0.200", "--for", "ds/agent", "--subnet", "cli-narrow"); err == nil || !strings.Contains(err.Error(), "outside subnet cli-narrow") {
		t.Errorf("reserve in a subnet that does not hold the address: %v", err)
	}
	if out, err := run(t, "", "-n", ns, "reserve", "10.95.0.5", "--for", "ds/agent", "--subnet", "cli-narrow"); err != nil {
		t.Fatalf("reserve with --subnet: %v\n%s", err, out)
	}
	if ipi := getRecord(t, "10.95.0.5"); ipi.Spec.Subnet != "cli-narrow" || ipi.Spec.Network != "net-b" || ipi.Spec.Address.IP != "10.95.0.5/25" || ipi.Spec.Address.NetID != nil {
		t.Errorf("record in the chosen subnet: %+v", ipi.Spec)
	}
	if out, err := run(t, "", "-n", ns, "reserve", "fd00:95::7", "--for", "ds/agent"); err != nil {
		t.Fatalf("reserve IPv6: %v\n%s", err, out)
	}
	if ipi := getRecord(t, "fd00-95--7"); ipi.Spec.Address.IP != "fd00:95::7/64" || ipi.Spec.Address.Version != 6 || ipi.Spec.Binding.Owner.Kind != "DaemonSet" {
		t.Errorf("IPv6 reservation: %+v", ipi.Spec)
	}
}

// racingClient creates a record of its own just before the create of the
// address race names, as another writer would.
type racingClient struct {
	client.Client
	race string
	lost *estuaryv1.IPInstance
}

func (c *racingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetName() == c.race && c.lost == nil {
		c.lost = obj.DeepCopyObject().(*estuaryv1.IPInstance)
		c.lost.Spec.Binding = estuaryv1.Binding{Namespace: "other", PodName: "winner", Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: "winner"}}
		c.lost.Spec.Reserved = false
		c.lost.Status.Phase = estuaryv1.IPInstanceBound
		if err := c.Client.Create(ctx, c.lost); err != nil {
			return fmt.Errorf("racing create: %w", err)
		}
	}
	return c.Client.Create(ctx, obj, opts...)
}

// A create that loses a race midway deletes the records the command made
// before it: the range is reserved whole or not at all.
func TestReserveRollsBackWhenACreateFails(t *testing.T) {
	ns := namespace(t)
	resSubnet(t)
	addrs, err := parseAddrRange("10.94.0.20-10.94.0.23")
	if err != nil {
		t.Fatal(err)
	}
	k := &racingClient{Client: k8s, race: "10.94.0.22"}
	var out strings.Builder
	err = reserve(bg(), k, Streams{Out: &out, Err: &out}, reserveRequest{what: "10.94.0.20-10.94.0.23", ns: ns, kind: "StatefulSet", name: "db", addrs: addrs})
	if err == nil {
		t.Fatalf("reserve that lost a race succeeded:\n%s", out.String())
	}
	for _, w := range []string{"10.94.0.22/24 was recorded meanwhile", "pod other/winner", "rolled back", "10.94.0.20 10.94.0.21"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if got := strings.Join(recordsOf(t, "cli-res"), " "); got != "10.94.0.22" {
		t.Errorf("records after the rollback: %q, want only the other writer's 10.94.0.22", got)
	}
	if ipi := getRecord(t, "10.94.0.22"); ipi.UID != k.lost.UID {
		t.Errorf("ipinstance 10.94.0.22 is not the other writer's record")
	}
}
