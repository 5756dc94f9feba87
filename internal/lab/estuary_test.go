package lab

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/internal/lab/images"
)

func TestEstuaryValues(t *testing.T) {
	plan, err := NewPlan(2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EstuaryValues(plan, images.Estuary{
		Manager: images.Built{Tag: "estuary.local/estuary-manager:aaaaaaaaaaaa"},
		Daemon:  images.Built{Tag: "estuary.local/estuary-daemon:bbbbbbbbbbbb"},
	})
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
	}
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if v.ImagePullPolicy != "Never" ||
		v.Manager.Image.Repository != "estuary.local/estuary-manager" || v.Manager.Image.Tag != "aaaaaaaaaaaa" ||
		v.Daemon.Image.Repository != "estuary.local/estuary-daemon" || v.Daemon.Image.Tag != "bbbbbbbbbbbb" ||
		v.Daemon.CNIVersion != "1.0.0" {
		t.Errorf("images: %s", b)
	}
	sn := v.DefaultNetwork.Subnets
	if !v.DefaultNetwork.Enabled || len(sn) != 1 || sn[0].Name != "overlay-v4" || sn[0].CIDR != PodCIDR || !sn[0].NATOutgoing {
		t.Errorf("default network: %s", b)
	}
}

func TestChartVersion(t *testing.T) {
	v, err := chartVersion(filepath.Join("..", "..", "charts", "estuary"))
	if err != nil || v == "" {
		t.Fatalf("chart version %q: %v", v, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := chartVersion(dir); err == nil {
		t.Error("a Chart.yaml without version was accepted")
	}
}
