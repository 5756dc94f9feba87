package lab

import (
	"testing"

	"sigs.k8s.io/yaml"
)

func TestEstuaryValues(t *testing.T) {
	plan, err := NewPlan(2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EstuaryValues(plan)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ImagePullPolicy string `json:"imagePullPolicy"`
		Manager         struct {
			Image struct{ Repository, Tag string }
		}
		Daemon struct {
			Image      struct{ Repository, Tag string }
			CNIVersion string `json:"cniVersion"`
		}
		DefaultNetwork struct {
			Enabled bool
			Subnets []struct {
				Name, CIDR  string
				NATOutgoing bool `json:"natOutgoing"`
			}
		} `json:"defaultNetwork"`
		Underlay struct {
			VLANUplinks []string `json:"vlanUplinks"`
		}
	}
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	// The images are the released chart's defaults: nothing overrides them.
	if v.ImagePullPolicy != "" || v.Manager.Image.Repository != "" || v.Daemon.Image.Repository != "" ||
		v.Daemon.CNIVersion != "1.0.0" {
		t.Errorf("images: %s", b)
	}
	if u := v.Underlay.VLANUplinks; len(u) != 2 || u[0] != LabAltUplink || u[1] != "eth0" {
		t.Errorf("VLAN uplinks %v, want [%s eth0]: %s", u, LabAltUplink, b)
	}
	sn := v.DefaultNetwork.Subnets
	if !v.DefaultNetwork.Enabled || len(sn) != 1 || sn[0].Name != "overlay-v4" || sn[0].CIDR != PodCIDR || !sn[0].NATOutgoing {
		t.Errorf("default network: %s", b)
	}
}
