package migrate

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
)

// fixture reads testdata/hybridnet.yaml into an Input with the pods and
// StatefulSets it refers to.
func fixture(t *testing.T) Input {
	t.Helper()
	f, err := os.Open("testdata/hybridnet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	objs, err := ReadObjects(f.Name(), f)
	if err != nil {
		t.Fatal(err)
	}
	networks, subnets, ipis, rest := Sort(objs)
	if len(networks) != 5 || len(subnets) != 8 || len(ipis) != 11 || len(rest) != 0 {
		t.Fatalf("read %d networks, %d subnets, %d ipinstances, %d others", len(networks), len(subnets), len(ipis), len(rest))
	}
	owner := func(kind, name string) workload.Ref {
		return workload.Ref{Namespace: "default", Kind: kind, Name: name, UID: "uid-" + name}
	}
	return Input{
		Networks: networks, Subnets: subnets, IPInstances: ipis,
		Pods: map[string]Pod{
			"default/web-0":          {UID: "uid-web-0", Node: "node-a", Owner: owner("StatefulSet", "web")},
			"default/api-7d9f-x2x4k": {UID: "uid-api", Node: "node-b", Owner: owner("Deployment", "api")},
			"default/agent-abcde":    {UID: "uid-agent", Node: "node-c", Owner: owner("DaemonSet", "agent")},
			"default/batch-done":     {UID: "uid-done", Node: "node-b", Finished: true, Owner: owner("Job", "batch")},
		},
		Sets:            map[string]Set{"default/web": {UID: "uid-web", Replicas: 3}},
		SecretNamespace: "kube-system",
		RetainTTL:       24 * time.Hour,
	}
}

func names[T interface{ GetName() string }](objs []T) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetName()
	}
	return out
}

func find[T interface{ GetName() string }](t *testing.T, objs []T, name string) T {
	t.Helper()
	i := slices.IndexFunc(objs, func(o T) bool { return o.GetName() == name })
	if i < 0 {
		t.Fatalf("%s was not migrated", name)
	}
	return objs[i]
}

// Networks and their BGP passwords: types and modes with hybridnet's
// defaults made explicit, netIDs and selectors kept, peers canonical with
// their password in a Secret, hybridnet's peer knobs as estuary's (every
// peer without allowNotEstablished requires an Established session), the
// GlobalBGP network with its netID dropped.
func TestTranslateNetworks(t *testing.T) {
	r := Translate(fixture(t))
	if got, want := names(r.Networks), []string{"init", "vlan-a", "vlan-b", "bgp-a", "global"}; !sameSet(got, want) {
		t.Fatalf("networks %v, want %v", got, want)
	}
	for _, c := range []struct {
		name  string
		typ   estuaryv1.NetworkType
		mode  estuaryv1.NetworkMode
		netID int64
		sel   map[string]string
	}{
		{"init", estuaryv1.NetworkTypeOverlay, estuaryv1.NetworkModeVXLAN, 4, nil},
		{"vlan-a", estuaryv1.NetworkTypeUnderlay, estuaryv1.NetworkModeVLAN, 100, map[string]string{"network": "vlan-a"}},
		{"vlan-b", estuaryv1.NetworkTypeUnderlay, estuaryv1.NetworkModeVLAN, 200, map[string]string{"network": "vlan-b"}},
		{"bgp-a", estuaryv1.NetworkTypeUnderlay, estuaryv1.NetworkModeBGP, 65001, map[string]string{"network": "bgp-a"}},
		{"global", estuaryv1.NetworkTypeGlobalBGP, "", -1, nil},
	} {
		n := find(t, r.Networks, c.name)
		if n.Spec.Type != c.typ || n.Spec.Mode != c.mode || ptr.Deref(n.Spec.NetID, -1) != c.netID ||
			!equality.Semantic.DeepEqual(n.Spec.NodeSelector, c.sel) || n.Labels[LabelMigratedFrom] != "hybridnet" {
			t.Errorf("network %s: %+v %v", c.name, n.Spec, n.Labels)
		}
	}
	bgp := find(t, r.Networks, "bgp-a")
	wantPeers := []estuaryv1.BGPPeer{
		{Address: "10.82.0.1", ASN: 65000, RequireEstablished: true,
			PasswordSecretRef: &estuaryv1.SecretKeyReference{Namespace: "kube-system", Name: "bgp-a-bgp-passwords", Key: "10.82.0.1"}},
		{Address: "fd00:82::1", ASN: 65000, GracefulRestartSeconds: ptr.To[int32](120), RequireEstablished: true},
		{Address: "10.82.0.3", ASN: 65000, DoesNotRouteTraffic: true},
	}
	if !equality.Semantic.DeepEqual(bgp.Spec.BGPPeers, wantPeers) {
		t.Errorf("bgp-a peers %+v, want %+v", bgp.Spec.BGPPeers, wantPeers)
	}
	if bgp.Spec.BGPWaitForPeer != nil {
		t.Errorf("bgp-a: bgpWaitForPeer %v, want unset (two peers require a session)", *bgp.Spec.BGPWaitForPeer)
	}
	if len(r.Secrets) != 1 || r.Secrets[0].Namespace != "kube-system" || r.Secrets[0].Name != "bgp-a-bgp-passwords" ||
		string(r.Secrets[0].Data["10.82.0.1"]) != "s3cret" || len(r.Secrets[0].Data) != 1 {
		t.Errorf("secrets %+v", r.Secrets)
	}
	requireReported(t, r.Report.NotMigrated,
		"network global: spec.netID: 65002: a GlobalBGP network takes no netID",
		"network vlan-b: spec.config.futureKnob: a field kubectl estuary migrate does not know",
		"network bgp-a: spec.config.bgpPeers[0].gracefulRestartSeconds: 5000 is over 4095")
	requireReported(t, r.Report.Notes, "network bgp-a: spec.config.bgpPeers[*].password: moved into Secret kube-system/bgp-a-bgp-passwords")
}

// Subnets: integer versions, ranges in canonical form, reserved and
// excluded addresses folded into ranges, natOutgoing explicit, a VLAN
// override kept; what estuary cannot express reported, and a subnet whose
// exclusions do not fit left out whole.
func TestTranslateSubnets(t *testing.T) {
	r := Translate(fixture(t))
	if got, want := names(r.Subnets), []string{"init", "init-2", "vlan-a-1", "vlan-b-1", "bgp-a-1", "global-1"}; !sameSet(got, want) {
		t.Fatalf("subnets %v, want %v", got, want)
	}
	v6 := find(t, r.Subnets, "init-2")
	if v6.Spec.Range.Version != 6 || v6.Spec.Range.CIDR != "fd00:24::/112" || !ptr.Deref(v6.Spec.NATOutgoing, false) {
		t.Errorf("init-2: %+v", v6.Spec)
	}
	a := find(t, r.Subnets, "vlan-a-1")
	want := estuaryv1.SubnetSpec{Network: "vlan-a", NATOutgoing: ptr.To(false), ReservedNamespaceSelector: &metav1.LabelSelector{},
		Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.81.0.0/24", Gateway: "10.81.0.254", Start: "10.81.0.10", End: "10.81.0.200",
			ReservedIPs: []estuaryv1.AddressOrRange{"10.81.0.20-10.81.0.21"},
			ExcludeIPs:  []estuaryv1.AddressOrRange{"10.81.0.30-10.81.0.32", "10.81.0.40"}}}
	if !equality.Semantic.DeepEqual(a.Spec, want) {
		t.Errorf("vlan-a-1:\n%+v\nwant\n%+v", a.Spec, want)
	}
	b := find(t, r.Subnets, "vlan-b-1")
	if ptr.Deref(b.Spec.NetID, -1) != 201 || !b.Spec.Private || ptr.Deref(b.Spec.NATOutgoing, true) {
		t.Errorf("vlan-b-1: %+v", b.Spec)
	}
	requireReported(t, r.Report.NotMigrated,
		"subnet vlan-a-1: spec.config.gatewayType: estuary has no equivalent",
		"subnet vlan-a-2: spec.range.cidr 10.81.1.0/31: estuary's IPv4 subnets are /30 or larger",
		"subnet vlan-b-2: spec.range.excludeIPs: its 33 addresses make 33 ranges; estuary takes at most 32")
	requireReported(t, r.Report.Notes,
		"subnet vlan-a-1: spec.config.autoNatOutgoing: true has no effect on an Underlay subnet",
		"subnet vlan-a-1: spec.range.reservedIPs: hybridnet gives a reserved address to any pod")
}

// Addresses: a running StatefulSet pod's Bound, an away one's Retained for
// its ordinal, a running Deployment pod's Bound with the workload's
// retention and its address count, MACs kept in canonical form; addresses
// hybridnet would release or estuary would not hand out left out with why.
func TestTranslateAddresses(t *testing.T) {
	r := Translate(fixture(t))
	if got, want := names(r.IPInstances), []string{"10.81.0.11", "10.81.0.12", "172.24.0.5", "fd00-24--5", "10.82.1.5", "10.84.0.5", "172.24.0.8"}; !sameSet(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	web0 := find(t, r.IPInstances, "10.81.0.11")
	if web0.Status.Phase != estuaryv1.IPInstanceBound || web0.Spec.Binding.PodUID != "uid-web-0" || web0.Spec.Binding.NodeName != "node-a" ||
		ptr.Deref(web0.Spec.Binding.StatefulOrdinal, -1) != 0 || web0.Spec.Binding.Owner != (estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "web", UID: "uid-web"}) ||
		web0.Spec.Address.MAC != "ee:ee:0a:51:00:0b" || web0.Spec.Address.IP != "10.81.0.11/24" || web0.Spec.Address.Gateway != "10.81.0.254" ||
		ptr.Deref(web0.Spec.Address.NetID, -1) != 100 || web0.Spec.Retention != nil || web0.Annotations[estuaryv1.AnnotationAddresses] != "1" {
		t.Errorf("web-0's record: %+v %+v %v", web0.Spec, web0.Status, web0.Annotations)
	}
	web1 := find(t, r.IPInstances, "10.81.0.12")
	if web1.Status.Phase != estuaryv1.IPInstanceRetained || web1.Spec.Binding.PodName != "web-1" || web1.Spec.Binding.PodUID != "" ||
		ptr.Deref(web1.Spec.Binding.StatefulOrdinal, -1) != 1 || web1.Annotations != nil {
		t.Errorf("web-1's record: %+v %+v", web1.Spec, web1.Status)
	}
	for _, name := range []string{"172.24.0.5", "fd00-24--5"} {
		api := find(t, r.IPInstances, name)
		if api.Status.Phase != estuaryv1.IPInstanceBound || api.Spec.Binding.Owner != (estuaryv1.OwnerReference{Kind: "Deployment", Name: "api", UID: "uid-api"}) ||
			api.Spec.Retention == nil || api.Spec.Retention.TTL.Duration != 24*time.Hour || api.Annotations[estuaryv1.AnnotationAddresses] != "2" ||
			api.Labels[estuaryv1.LabelPod] != "api-7d9f-x2x4k" || api.Labels[estuaryv1.LabelNode] != "node-b" {
			t.Errorf("api pod's record %s: %+v %+v %v %v", name, api.Spec, api.Status, api.Annotations, api.Labels)
		}
	}
	agent := find(t, r.IPInstances, "10.82.1.5")
	if agent.Spec.Binding.PodName != "agent-abcde" || agent.Spec.Binding.Owner.Kind != "DaemonSet" || agent.Spec.Address.MAC != "ee:ee:0a:52:01:05" ||
		agent.Spec.Address.Gateway != "" || ptr.Deref(agent.Spec.Address.NetID, -1) != 65001 {
		t.Errorf("agent's record (binding in an older hybridnet's status): %+v", agent.Spec)
	}
	requireReported(t, r.Report.NotMigrated,
		"ipinstance default/10-81-0-13: StatefulSet default/web has 3 replicas, so no pod of ordinal 3",
		"ipinstance default/172-24-0-6: pod default/gone-pod is gone",
		"ipinstance default/172-24-0-7: pod default/batch-done has finished",
		"ipinstance default/10-81-0-30: estuary would not hand out 10.81.0.30 in subnet vlan-a-1")
	global := find(t, r.IPInstances, "10.84.0.5")
	if global.Spec.Network != "global" || global.Spec.Subnet != "global-1" || global.Spec.Address.IP != "10.84.0.5/24" ||
		ptr.Deref(global.Spec.Binding.StatefulOrdinal, -1) != 2 {
		t.Errorf("web-2's GlobalBGP record: %+v", global.Spec)
	}
	if n := len(r.Report.NotMigrated); n != 10 {
		t.Errorf("%d items not migrated, want 10:\n%v", n, r.Report.NotMigrated)
	}
	// A virtual machine's address, its virt-launcher pod not running now:
	// kept for the VirtualMachine hybridnet's label names, without expiry.
	vm := find(t, r.IPInstances, "172.24.0.8")
	if vm.Status.Phase != estuaryv1.IPInstanceRetained || vm.Spec.Binding.Owner != (estuaryv1.OwnerReference{Kind: "VirtualMachine", Name: "vm-1"}) ||
		vm.Spec.Retention == nil || vm.Spec.Retention.TTL != nil || vm.Spec.Binding.PodUID != "" {
		t.Errorf("vm-1's record: %+v %+v", vm.Spec, vm.Status)
	}
}

// Without the pods (files holding only hybridnet's objects), a
// StatefulSet's address is still kept for its ordinal and a virtual
// machine's for the machine; any other pod's is reported, since its
// workload is not known.
func TestTranslateWithoutPods(t *testing.T) {
	in := fixture(t)
	in.Pods, in.Sets = nil, nil
	r := Translate(in)
	if got, want := names(r.IPInstances), []string{"10.81.0.11", "10.81.0.12", "10.81.0.13", "10.84.0.5", "172.24.0.8"}; !sameSet(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	for _, ipi := range r.IPInstances {
		if ipi.Status.Phase != estuaryv1.IPInstanceRetained {
			t.Errorf("%s is %s; without the pods every StatefulSet and virtual machine address is Retained", ipi.Name, ipi.Status.Phase)
		}
	}
	requireReported(t, r.Report.NotMigrated, "ipinstance default/172-24-0-5: pod default/api-7d9f-x2x4k: its workload is not known without the pods")
}

// The result does not depend on the order of the input.
func TestTranslateIsDeterministic(t *testing.T) {
	in := fixture(t)
	want := Translate(in)
	for range 5 {
		for _, l := range [][]*unstructured.Unstructured{in.Networks, in.Subnets, in.IPInstances} {
			rand.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
		}
		if got := Translate(in); !equality.Semantic.DeepEqual(got, want) {
			t.Fatal("a shuffled input translates differently")
		}
	}
}

// Existing estuary objects take part in the webhook's rules: a second
// Overlay network is refused as the webhook would.
func TestTranslateChecksExisting(t *testing.T) {
	in := fixture(t)
	in.Existing.Networks = []estuaryv1.Network{{ObjectMeta: metav1.ObjectMeta{Name: "overlay"},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](4)}}}
	r := Translate(in)
	requireReported(t, r.Report.NotMigrated, `network init: estuary's admission webhook would refuse it`, `already has an Overlay network, network "overlay"`,
		`subnet init: its network "init" is not migrated`, `ipinstance default/172-24-0-5: its subnet "init" is not migrated`)
}

func TestFoldRanges(t *testing.T) {
	p := netip.MustParsePrefix("10.0.0.0/24")
	got, why := foldRanges("excludeIPs", []string{"10.0.0.9", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.7", "10.0.0.255"}, p)
	if why != "" || !slices.Equal(got, []estuaryv1.AddressOrRange{"10.0.0.5-10.0.0.7", "10.0.0.9", "10.0.0.255"}) {
		t.Errorf("folded %v (%s)", got, why)
	}
	if _, why := foldRanges("excludeIPs", []string{"10.0.1.1"}, p); !strings.Contains(why, `"10.0.1.1" is not an address of 10.0.0.0/24`) {
		t.Errorf("an address outside: %q", why)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// requireReported fails unless every one of want is part of some item.
func requireReported(t *testing.T, items []Item, want ...string) {
	t.Helper()
	all := make([]string, len(items))
	for i, it := range items {
		all[i] = it.String()
	}
	text := strings.Join(all, "\n")
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("report does not say %q:\n%s", w, text)
		}
	}
}
