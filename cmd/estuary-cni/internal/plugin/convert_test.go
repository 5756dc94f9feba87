package plugin

import (
	"encoding/json"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	cniversion "github.com/containernetworking/cni/pkg/version"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
)

func sampleReply() *cniv1.AddReply {
	idx := int32(1)
	table, scope := uint32(1000), uint32(253)
	return &cniv1.AddReply{
		Interfaces: []*cniv1.Interface{
			{Name: "est1234", Mac: "ee:ee:ee:ee:ee:ee", Mtu: 1450},
			{Name: "eth0", Mac: "02:42:0a:f4:00:02", Mtu: 1450, Sandbox: "/var/run/netns/x"},
		},
		Ips: []*cniv1.IPConfig{
			{Interface: &idx, Address: "10.244.0.2/32", Gateway: "169.254.1.1"},
			{Interface: &idx, Address: "fd00::2/128"},
		},
		Routes: []*cniv1.Route{{Dst: "0.0.0.0/0", Gw: "169.254.1.1", Table: &table, Scope: &scope}},
		Dns:    &cniv1.DNS{Nameservers: []string{"10.96.0.10"}, Search: []string{"svc.cluster.local"}},
	}
}

func TestToResultRoundTrip(t *testing.T) {
	res, err := ToResult(sampleReply())
	if err != nil {
		t.Fatalf("ToResult: %v", err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cniVersion":"1.1.0"`, `"address":"10.244.0.2/32"`, `"gateway":"169.254.1.1"`, `"interface":1`, `"dst":"0.0.0.0/0"`, `"table":1000`, `"sandbox":"/var/run/netns/x"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("result %s lacks %s", raw, want)
		}
	}
	parsed, err := types100.NewResult(raw)
	if err != nil {
		t.Fatalf("result does not parse as 1.1.0: %v", err)
	}
	back, err := FromResult(parsed)
	if err != nil {
		t.Fatalf("FromResult: %v", err)
	}
	if len(back.GetIps()) != 2 || back.GetIps()[0].GetAddress() != "10.244.0.2/32" || back.GetIps()[1].GetAddress() != "fd00::2/128" || back.GetIps()[0].GetInterface() != 1 {
		t.Fatalf("FromResult IPs = %v", back.GetIps())
	}
}

func TestToResultRejectsBadReplies(t *testing.T) {
	idx := int32(5)
	cases := map[string]*cniv1.AddReply{
		"bad address":   {Ips: []*cniv1.IPConfig{{Address: "10.0.0.2"}}},
		"bad gateway":   {Ips: []*cniv1.IPConfig{{Address: "10.0.0.2/32", Gateway: "gw"}}},
		"bad interface": {Ips: []*cniv1.IPConfig{{Address: "10.0.0.2/32", Interface: &idx}}},
		"bad route":     {Routes: []*cniv1.Route{{Dst: "default"}}},
		"bad route gw":  {Routes: []*cniv1.Route{{Dst: "0.0.0.0/0", Gw: "x"}}},
	}
	for name, r := range cases {
		if _, err := ToResult(r); err == nil {
			t.Errorf("%s: ToResult succeeded", name)
		}
	}
}

func TestFromResultOlderVersion(t *testing.T) {
	conf, err := ParseConfig([]byte(`{"cniVersion":"0.4.0","name":"e","prevResult":{"cniVersion":"0.4.0","interfaces":[{"name":"eth0"}],"ips":[{"version":"4","interface":0,"address":"10.0.0.2/24"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := FromResult(conf.PrevResult)
	if err != nil || len(out.GetIps()) != 1 || out.GetIps()[0].GetAddress() != "10.0.0.2/24" {
		t.Fatalf("FromResult = %v, %v", out, err)
	}
}

// TestResultAt100NamesThePodInterface: the result printed for a 1.0.0
// conflist (containerd 1.6), read back as a chained plugin reads its
// prevResult, still names the pod's interface with its sandbox, and every
// address points at it.
func TestResultAt100NamesThePodInterface(t *testing.T) {
	res, err := ToResult(sampleReply())
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.GetAsVersion("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := cniversion.NewResult("1.0.0", raw)
	if err != nil {
		t.Fatalf("%s does not parse as 1.0.0: %v", raw, err)
	}
	r, err := types100.NewResultFromResult(prev)
	if err != nil {
		t.Fatal(err)
	}
	if prev.Version() != "1.0.0" || len(r.Interfaces) != 2 || r.Interfaces[1].Name != "eth0" || r.Interfaces[1].Sandbox != "/var/run/netns/x" ||
		r.Interfaces[0].Sandbox != "" {
		t.Fatalf("result %s: want version 1.0.0, interface 1 eth0 in sandbox /var/run/netns/x, interface 0 on the host", raw)
	}
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface != 1 {
			t.Errorf("result %s: %s does not point at interface 1", raw, ip.Address.String())
		}
	}
}
