package render

import (
	"encoding/json"
	"net/netip"
	"testing"
)

func TestFlannelNetConfFamilies(t *testing.T) {
	b, err := FlannelNetConf([]netip.Prefix{netip.MustParsePrefix("10.78.0.0/16"), netip.MustParsePrefix("fd78::/48")}, true)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"Network": "10.78.0.0/16", "IPv6Network": "fd78::/48", "EnableIPv4": true,
		"EnableIPv6": true, "EnableNFTables": true}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if be, _ := got["Backend"].(map[string]any); be["Type"] != "vxlan" {
		t.Errorf("Backend = %v, want type vxlan", got["Backend"])
	}
	b, err = FlannelNetConf([]netip.Prefix{netip.MustParsePrefix("10.78.0.0/16")}, false)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["IPv6Network"]; ok || got["EnableIPv4"] != true || got["EnableNFTables"] != false {
		t.Errorf("IPv4-only iptables configuration = %v", got)
	}
	if _, err := FlannelNetConf(nil, false); err == nil {
		t.Error("no pod range: want an error")
	}
}

func TestFlannelCNIDelegatesToBridge(t *testing.T) {
	b, err := FlannelCNI()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name    string
		Plugins []struct {
			Type     string
			Delegate map[string]any
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Plugins) != 2 || got.Plugins[0].Type != "flannel" || got.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins = %+v, want flannel then portmap", got.Plugins)
	}
	d := got.Plugins[0].Delegate
	if d["hairpinMode"] != true || d["isDefaultGateway"] != true {
		t.Errorf("delegate = %v, want hairpinMode and isDefaultGateway", d)
	}
}

func TestFlannelRBACBindsTheFlannelUser(t *testing.T) {
	b, err := FlannelRBAC()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Items []struct {
			Kind     string
			Subjects []struct{ Kind, Name string }
			Rules    []struct{ Resources, Verbs []string }
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 2 || got.Items[1].Subjects[0].Kind != "User" || got.Items[1].Subjects[0].Name != FlannelUser {
		t.Fatalf("items = %+v", got.Items)
	}
	patch := false
	for _, r := range got.Items[0].Rules {
		if r.Resources[0] == "nodes/status" && r.Verbs[0] == "patch" {
			patch = true
		}
	}
	if !patch {
		t.Error("the ClusterRole does not let flanneld patch node status")
	}
}
