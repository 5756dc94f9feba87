package crd

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

const header = "apiVersion: networking.estuary.io/v1\nkind: %s\nmetadata:\n  name: %s\n%s"

func network(name, spec string) string {
	return fmt.Sprintf(header, "Network", name, "spec:\n"+indent(spec))
}

func subnet(name, spec string) string {
	return fmt.Sprintf(header, "Subnet", name, "spec:\n"+indent(spec))
}

// ipInstance is an IPInstance named after the address in spec (the name its
// address requires), or name when it is not empty.
func ipInstance(name, spec, phase string) string {
	if name == "" {
		name = "unnamed"
		if m := specIP.FindStringSubmatch(spec); m != nil {
			if p, err := netip.ParsePrefix(m[1]); err == nil {
				name = estuaryv1.InstanceName(p.Addr())
			}
		}
	}
	body := "spec:\n" + indent(spec) + "status:\n  phase: " + phase + "\n"
	return fmt.Sprintf(header, "IPInstance", name, body)
}

var specIP = regexp.MustCompile(`ip: "?([^"\s,}]+)"?`)

// setName names a test object, except an IPInstance: its name is its address.
func setName(obj *unstructured.Unstructured, name string) {
	if obj.GetKind() != "IPInstance" {
		obj.SetName(name)
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.Trim(s, "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

const (
	overlaySpec = "type: Overlay\nnetID: 4\n"
	vlanSpec    = "type: Underlay\nmode: VLAN\nnetID: 10\nnodeSelector:\n  rack: r1\n"
	bgpSpec     = "type: Underlay\nmode: BGP\nnetID: 64600\nnodeSelector:\n  bgp: \"true\"\nbgpPeers:\n- address: 10.0.0.1\n  asn: 64512\n"
	v4RangeSpec = "network: n1\nrange:\n  version: 4\n  cidr: 10.1.0.0/24\n  start: 10.1.0.9\n  end: 10.1.0.10\n  gateway: 10.1.0.1\n"
	v6RangeSpec = "network: n1\nrange:\n  version: 6\n  cidr: fd00:1::/64\n  start: fd00:1::9\n  end: fd00:1::a\n"
	ipiSpec     = "network: n1\nsubnet: s1\naddress:\n  ip: 10.1.0.7/24\n  version: 4\n  gateway: 10.1.0.1\nbinding:\n  namespace: default\n  owner: {kind: Pod, name: p, uid: u1}\n  podName: p\n"
)

// createCases are objects the API server must refuse to create.
var createCases = []struct {
	name, obj, field, message string
}{
	// Network
	{"network without type", network("x", "netID: 4\n"), "spec.type", "Required value"},
	{"network with unknown type", network("x", "type: Hybrid\nnetID: 4\n"), "spec.type", "Unsupported value"},
	{"network with unknown mode", network("x", "type: Overlay\nmode: GRE\nnetID: 4\n"), "spec.mode", "Unsupported value"},
	{"overlay in VLAN mode", network("x", "type: Overlay\nmode: VLAN\nnetID: 4\n"), "spec.mode", "Overlay networks use mode VXLAN"},
	{"underlay in VXLAN mode", network("x", "type: Underlay\nmode: VXLAN\nnetID: 4\nnodeSelector: {a: b}\n"), "spec.mode", "Underlay networks use mode VLAN or BGP"},
	{"underlay without nodeSelector", network("x", "type: Underlay\nmode: VLAN\n"), "spec.nodeSelector", "needs a nodeSelector"},
	{"network namespace that is not a name", network("x", "type: Overlay\nnetID: 4\nnamespaces: [team-a, Team_B]\n"), "spec.namespaces[1]", "should match"},
	{"network namespace listed twice", network("x", "type: Overlay\nnetID: 4\nnamespaces: [team-a, team-a]\n"), "spec.namespaces[1]", "Duplicate value"},
	{"underlay with empty nodeSelector", network("x", "type: Underlay\nnodeSelector: {}\n"), "spec.nodeSelector", "needs a nodeSelector"},
	{"overlay with nodeSelector", network("x", overlaySpec+"nodeSelector: {a: b}\n"), "spec.nodeSelector", "takes no nodeSelector"},
	{"overlay without VNI", network("x", "type: Overlay\n"), "spec.netID", "needs netID, its VNI"},
	{"overlay with VNI 0", network("x", "type: Overlay\nnetID: 0\n"), "spec.netID", "from 1 to 16777215"},
	{"overlay with VNI over 24 bits", network("x", "type: Overlay\nnetID: 16777216\n"), "spec.netID", "from 1 to 16777215"},
	{"VLAN id 4095", network("x", "type: Underlay\nnetID: 4095\nnodeSelector: {a: b}\n"), "spec.netID", "0 (untagged) to 4094"},
	{"negative netID", network("x", "type: Underlay\nnetID: -1\nnodeSelector: {a: b}\n"), "spec.netID", "greater than or equal to 0"},
	{"netID over 32 bits", network("x", "type: Underlay\nmode: BGP\nnetID: 4294967296\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.1, asn: 1}]\n"), "spec.netID", "less than or equal to 4294967295"},
	{"BGP without AS number", network("x", "type: Underlay\nmode: BGP\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.1, asn: 1}]\n"), "spec.netID", "needs netID, the nodes' local AS number"},
	{"BGP without peers", network("x", "type: Underlay\nmode: BGP\nnetID: 64600\nnodeSelector: {a: b}\n"), "spec.bgpPeers", "at least one peer"},
	{"bgpPeers on a VLAN network", network("x", vlanSpec+"bgpPeers: [{address: 10.0.0.1, asn: 1}]\n"), "spec.bgpPeers", "only allowed on a network in mode BGP"},
	{"BGP peer with bad address", network("x", "type: Underlay\nmode: BGP\nnetID: 1\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.256, asn: 1}]\n"), "spec.bgpPeers[0].address", "must be an IP address"},
	{"BGP peer with AS 0", network("x", "type: Underlay\nmode: BGP\nnetID: 1\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.1, asn: 0}]\n"), "spec.bgpPeers[0].asn", "greater than or equal to 1"},
	{"BGP peer restart time over 4095", network("x", "type: Underlay\nmode: BGP\nnetID: 1\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.1, asn: 1, gracefulRestartSeconds: 5000}]\n"), "spec.bgpPeers[0].gracefulRestartSeconds", "less than or equal to 4095"},
	{"duplicate BGP peers", network("x", "type: Underlay\nmode: BGP\nnetID: 1\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.1, asn: 1}, {address: 10.0.0.1, asn: 2}]\n"), "spec.bgpPeers[1]", "Duplicate value"},
	{"bgpWaitForPeer on a VLAN network", network("x", vlanSpec+"bgpWaitForPeer: false\n"), "spec.bgpWaitForPeer", "only allowed on a network in mode BGP"},
	{"bgpWaitForPeer on an Overlay network", network("x", overlaySpec+"bgpWaitForPeer: true\n"), "spec.bgpWaitForPeer", "only allowed on a network in mode BGP"},
	{"BGP password without key", network("x", "type: Underlay\nmode: BGP\nnetID: 1\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.1, asn: 1, passwordSecretRef: {namespace: ns, name: s}}]\n"), "spec.bgpPeers[0].passwordSecretRef.key", "Required value"},

	// Subnet
	{"subnet without network", subnet("x", "range: {version: 4, cidr: 10.1.0.0/24}\n"), "spec.network", "Required value"},
	{"subnet without range", subnet("x", "network: n1\n"), "spec.range", "Required value"},
	{"CIDR with host bits", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.1/24}\n"), "spec.range.cidr", "must be a CIDR in canonical form"},
	{"CIDR that does not parse", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/33}\n"), "spec.range.cidr", "must be a CIDR in canonical form"},
	{"IPv6 CIDR in upper case", subnet("x", "network: n1\nrange: {version: 6, cidr: \"FD00:1::/64\"}\n"), "spec.range.cidr", "must be a CIDR in canonical form"},
	{"IPv4 /32", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.1/32}\n"), "spec.range.cidr", "must be /30 or larger"},
	{"IPv4 /31", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/31}\n"), "spec.range.cidr", "must be /30 or larger"},
	{"IPv6 /128", subnet("x", "network: n1\nrange: {version: 6, cidr: \"fd00:1::1/128\"}\n"), "spec.range.cidr", "must be /64 to /127"},
	{"IPv6 /48", subnet("x", "network: n1\nrange: {version: 6, cidr: \"fd00:1::/48\"}\n"), "spec.range.cidr", "must be /64 to /127"},
	{"IPv4-mapped IPv6 subnet", subnet("x", "network: n1\nrange: {version: 6, cidr: \"::ffff:10.1.0.0/120\"}\n"), "spec.range.cidr", "must be a CIDR in canonical form"},
	{"unknown version", subnet("x", "network: n1\nrange: {version: 5, cidr: 10.1.0.0/24}\n"), "spec.range.version", "Unsupported value"},
	{"version not matching the CIDR", subnet("x", "network: n1\nrange: {version: 6, cidr: 10.1.0.0/24}\n"), "spec.range.version", "must match the address family of cidr"},
	{"start outside the CIDR", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, start: 10.2.0.5}\n"), "spec.range.start", "start must be inside cidr"},
	{"end outside the CIDR", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, end: 10.1.1.5}\n"), "spec.range.end", "end must be inside cidr"},
	{"gateway outside the CIDR", subnet("x", "network: n1\nrange: {version: 6, cidr: \"fd00:1::/64\", gateway: \"fd00:2::1\"}\n"), "spec.range.gateway", "gateway must be inside cidr"},
	{"start with leading zeros", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, start: 10.1.0.010}\n"), "spec.range.start", "must be an IP address in canonical form"},
	{"IPv4 start after end", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, start: 10.1.0.100, end: 10.1.0.20}\n"), "spec.range.end", "start must not be after end"},
	{"IPv4 start after end, digit count trap", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, start: 10.1.0.10, end: 10.1.0.9}\n"), "spec.range.end", "start must not be after end"},
	{"IPv6 start after end", subnet("x", "network: n1\nrange: {version: 6, cidr: \"fd00:1::/64\", start: \"fd00:1::a\", end: \"fd00:1::9\"}\n"), "spec.range.end", "start must not be after end"},
	{"IPv6 start after end across groups", subnet("x", "network: n1\nrange: {version: 6, cidr: \"fd00:1::/64\", start: \"fd00:1::1:0\", end: \"fd00:1::ffff\"}\n"), "spec.range.end", "start must not be after end"},
	{"reserved address outside the CIDR", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, reservedIPs: [10.1.1.1]}\n"), "spec.range.reservedIPs", "every reserved address must be inside cidr"},
	{"excluded range leaving the CIDR", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, excludeIPs: [10.1.0.200-10.1.1.10]}\n"), "spec.range.excludeIPs", "every excluded address must be inside cidr"},
	{"reserved range reversed", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, reservedIPs: [10.1.0.20-10.1.0.10]}\n"), "spec.range.reservedIPs[0]", "first address must not be after its last"},
	{"excluded range of two families", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, excludeIPs: [\"10.1.0.1-fd00::1\"]}\n"), "spec.range.excludeIPs[0]", "both must be of one family"},
	{"excluded entry that is not an address", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, excludeIPs: [gateway]}\n"), "spec.range.excludeIPs[0]", "must be an IP address or a range"},
	{"excluded range with three parts", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, excludeIPs: [10.1.0.1-10.1.0.2-10.1.0.3]}\n"), "spec.range.excludeIPs[0]", "must be an IP address or a range"},
	{"subnet VLAN id 4095", subnet("x", "network: n1\nnetID: 4095\nrange: {version: 4, cidr: 10.1.0.0/24}\n"), "spec.netID", "less than or equal to 4094"},

	// IPInstance
	{"instance address without prefix length", ipInstance("", strings.Replace(ipiSpec, "10.1.0.7/24", "10.1.0.7", 1), "Bound"), "spec.address.ip", "with its subnet's prefix length"},
	{"instance address in a different family", ipInstance("", strings.Replace(ipiSpec, "version: 4", "version: 6", 1), "Bound"), "spec.address.version", "must match the address family of ip"},
	{"instance gateway outside its subnet", ipInstance("", strings.Replace(ipiSpec, "gateway: 10.1.0.1", "gateway: 10.9.0.1", 1), "Bound"), "spec.address.gateway", "gateway must be inside the address's subnet"},
	{"instance MAC in upper case", ipInstance("", strings.Replace(ipiSpec, "  gateway: 10.1.0.1\n", "  gateway: 10.1.0.1\n  mac: AA:BB:CC:DD:EE:FF\n", 1), "Bound"), "spec.address.mac", "should match"},
	{"instance without owner", ipInstance("", strings.Replace(ipiSpec, "  owner: {kind: Pod, name: p, uid: u1}\n", "", 1), "Bound"), "spec.binding.owner", "Required value"},
	{"instance with unknown phase", ipInstance("", ipiSpec, "Leaked"), "status.phase", "Unsupported value"},
	{"instance named after another address", ipInstance("10.1.0.8", ipiSpec, "Bound"), "metadata.name", "must be the address of spec.address.ip"},
	{"IPv6 instance named with colons", ipInstance("fd00:1::7", "network: n1\nsubnet: s6\naddress: {ip: \"fd00:1::7/64\", version: 6}\nbinding: {namespace: default, owner: {kind: Pod, name: p, uid: u1}, podName: p}\n", "Bound"), "metadata.name", "RFC 1123 subdomain"},
	{"instance without the pod's namespace", ipInstance("", strings.Replace(ipiSpec, "  namespace: default\n", "", 1), "Bound"), "spec.binding.namespace", "Required value"},
	{"instance with negative ordinal", ipInstance("", strings.Replace(ipiSpec, "  podName: p\n", "  podName: p\n  statefulOrdinal: -1\n", 1), "Bound"), "spec.binding.statefulOrdinal", "greater than or equal to 0"},
}

func TestCreateRejected(t *testing.T) {
	for i, tc := range createCases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.obj)
			setName(obj, fmt.Sprintf("invalid-%d", i))
			err := k8s.Create(ctx(t), obj.DeepCopy())
			if err == nil {
				cleanup(t, obj)
			}
			requireInvalid(t, err, tc.field, tc.message)
			requireAbsent(t, obj)
		})
	}
}

// updateCases are changes the API server must refuse on an existing object.
var updateCases = []struct {
	name, from, to, field, message string
}{
	{"network type", network("x", vlanSpec), network("x", overlaySpec), "spec.type", "type is immutable"},
	{"network mode", network("x", bgpSpec), network("x", strings.Replace(strings.Replace(bgpSpec, "BGP", "VLAN", 1), "netID: 64600", "netID: 100", 1)), "spec.mode", "mode is immutable"},
	{"network mode to a non-default", network("x", "type: Underlay\nnodeSelector: {a: b}\n"), network("x", "type: Underlay\nmode: BGP\nnetID: 1\nnodeSelector: {a: b}\nbgpPeers: [{address: 10.0.0.1, asn: 1}]\n"), "spec.mode", "mode is immutable"},
	{"network netID", network("x", overlaySpec), network("x", "type: Overlay\nnetID: 5\n"), "spec.netID", "netID is immutable"},
	{"network netID removed", network("x", vlanSpec), network("x", strings.Replace(vlanSpec, "netID: 10\n", "", 1)), "spec.netID", "netID is immutable"},
	{"subnet network", subnet("x", v4RangeSpec), subnet("x", strings.Replace(v4RangeSpec, "network: n1", "network: n2", 1)), "spec.network", "network is immutable"},
	{"subnet cidr", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24}\n"), subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/23}\n"), "spec.range.cidr", "cidr is immutable"},
	{"subnet start", subnet("x", v4RangeSpec), subnet("x", strings.Replace(v4RangeSpec, "start: 10.1.0.9", "start: 10.1.0.8", 1)), "spec.range.start", "start is immutable"},
	{"subnet end removed", subnet("x", v4RangeSpec), subnet("x", strings.Replace(v4RangeSpec, "  end: 10.1.0.10\n", "", 1)), "spec.range.end", "end is immutable"},
	{"subnet gateway added", subnet("x", v6RangeSpec), subnet("x", v6RangeSpec+"  gateway: \"fd00:1::1\"\n"), "spec.range.gateway", "gateway is immutable"},
	{"subnet netID", subnet("x", "network: n1\nnetID: 7\nrange: {version: 4, cidr: 10.1.0.0/24}\n"), subnet("x", "network: n1\nnetID: 8\nrange: {version: 4, cidr: 10.1.0.0/24}\n"), "spec.netID", "netID is immutable"},
	{"instance address", ipInstance("", ipiSpec, "Bound"), ipInstance("", strings.Replace(ipiSpec, "10.1.0.7/24", "10.1.0.8/24", 1), "Bound"), "spec.address.ip", "ip is immutable"},
	{"instance subnet", ipInstance("", ipiSpec, "Bound"), ipInstance("", strings.Replace(ipiSpec, "subnet: s1", "subnet: s2", 1), "Bound"), "spec.subnet", "subnet is immutable"},
}

func TestUpdateRejected(t *testing.T) {
	for i, tc := range updateCases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("immutable-%d", i)
			orig := decode(t, tc.from)
			setName(orig, name)
			name = orig.GetName()
			if err := k8s.Create(ctx(t), orig.DeepCopy()); err != nil {
				t.Fatalf("create the valid original: %v", err)
			}
			cleanup(t, orig)
			before := get(t, orig)

			changed := decode(t, tc.to)
			changed.SetName(name)
			changed.SetResourceVersion(before.GetResourceVersion())
			requireInvalid(t, k8s.Update(ctx(t), changed), tc.field, tc.message)

			after := get(t, orig)
			if !sameJSON(before.Object["spec"], after.Object["spec"]) {
				t.Errorf("rejected update changed the spec:\nbefore %v\nafter  %v", before.Object["spec"], after.Object["spec"])
			}
		})
	}
}

// validCases are objects and changes the API server must accept; several
// sit right at the edge of a rule.
func TestValidAccepted(t *testing.T) {
	cases := []struct{ name, obj, update string }{
		{"IPv4 range whose bounds differ in digit count", subnet("x", v4RangeSpec), ""},
		{"IPv6 range whose bounds differ in hex digit", subnet("x", v6RangeSpec), ""},
		{"IPv6 range across groups", subnet("x", "network: n1\nrange: {version: 6, cidr: \"fd00:1::/64\", start: \"fd00:1::ffff\", end: \"fd00:1::1:0\"}\n"), ""},
		{"single-address range", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/24, start: 10.1.0.5, end: 10.1.0.5, excludeIPs: [10.1.0.7-10.1.0.7]}\n"), ""},
		{"IPv4 /30", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.1.0.0/30}\n"), ""},
		{"IPv6 /127", subnet("x", "network: n1\nrange: {version: 6, cidr: \"fd00:1::/127\"}\n"), ""},
		{"IPv4 /8", subnet("x", "network: n1\nrange: {version: 4, cidr: 10.0.0.0/8}\n"), ""},
		{"mode defaulted later", network("x", "type: Underlay\nnodeSelector: {a: b}\n"), network("x", "type: Underlay\nmode: VLAN\nnodeSelector: {a: b}\n")},
		{"BGP network that lets pods start without a session", network("x", bgpSpec+"bgpWaitForPeer: false\n"), network("x", bgpSpec+"bgpWaitForPeer: true\n")},
		{"nodeSelector changed", network("x", vlanSpec), network("x", strings.Replace(vlanSpec, "rack: r1", "rack: r2", 1))},
		{"reserved and excluded addresses changed", subnet("x", v4RangeSpec+"  reservedIPs: [10.1.0.9]\n"), subnet("x", v4RangeSpec+"  reservedIPs: [10.1.0.9-10.1.0.10]\n  excludeIPs: [10.1.0.200]\n")},
		{"instance retained", ipInstance("", ipiSpec, "Bound"), ipInstance("", ipiSpec, "Retained")},
		{"IPv6 instance whose address ends in ::", ipInstance("", "network: n1\nsubnet: s6\naddress: {ip: \"fd00:1::/64\", version: 6}\nbinding: {namespace: default, owner: {kind: Pod, name: p, uid: u1}, podName: p}\n", "Bound"), ""},
		{"IPv6 instance", ipInstance("", "network: n1\nsubnet: s6\naddress: {ip: \"fd00:1::7/64\", version: 6, mac: \"0a:58:0a:f0:00:07\"}\nbinding: {namespace: default, owner: {kind: Pod, name: p, uid: u1}, podName: p, statefulOrdinal: 0}\n", "Bound"), ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.obj)
			setName(obj, fmt.Sprintf("valid-%d", i))
			if err := k8s.Create(ctx(t), obj.DeepCopy()); err != nil {
				t.Fatalf("rejected a valid object: %v", err)
			}
			cleanup(t, obj)
			if tc.update == "" {
				return
			}
			changed := decode(t, tc.update)
			changed.SetName(obj.GetName())
			changed.SetResourceVersion(get(t, obj).GetResourceVersion())
			if err := k8s.Update(ctx(t), changed.DeepCopy()); err != nil {
				t.Fatalf("rejected a valid update: %v", err)
			}
			if got := get(t, obj); !sameJSON(got.Object["spec"], changed.Object["spec"]) {
				t.Errorf("stored spec %v, want %v", got.Object["spec"], changed.Object["spec"])
			}
		})
	}
}

// TestSamplesAccepted creates every object in config/samples and reads it
// back unchanged, so the documented examples stay valid.
func TestSamplesAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found (%v)", err)
	}
	sort.Strings(files)
	count := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range decodeAll(t, string(data)) {
			want := obj.DeepCopy()
			if err := k8s.Create(ctx(t), obj); err != nil {
				t.Fatalf("%s: %s %s rejected: %v", filepath.Base(f), obj.GetKind(), obj.GetName(), err)
			}
			cleanup(t, obj)
			got := get(t, obj)
			if !sameJSON(got.Object["spec"], want.Object["spec"]) {
				t.Errorf("%s: %s %s stored spec %v, want %v", filepath.Base(f), obj.GetKind(), obj.GetName(), got.Object["spec"], want.Object["spec"])
			}
			count++
		}
	}
	if count < 8 {
		t.Errorf("only %d sample objects; the samples should cover every kind and mode", count)
	}
}

func get(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("get %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return got
}

func requireAbsent(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	err := k8s.Get(ctx(t), client.ObjectKeyFromObject(obj), got)
	if !apierrors.IsNotFound(err) {
		t.Errorf("rejected object exists afterwards (get: %v)", err)
	}
}

// sameJSON compares two decoded objects by their JSON encoding, so that an
// integer read back from the API server equals the same number parsed from
// YAML.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
