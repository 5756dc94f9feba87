package render

import (
	"os/exec"
	"strings"
	"testing"
)

func TestContainerdRealDefault(t *testing.T) {
	def, err := exec.Command("containerd", "config", "default").Output()
	if err != nil {
		t.Skipf("containerd not installed: %v", err)
	}
	out, err := Containerd(string(def), ContainerdOptions{SandboxImage: "p:x", Root: "/r", State: "/s", Address: "/s/c.sock", CNIBinDir: "/b", CNIConfDir: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, `"/s/c.sock"`) != 1 || strings.Count(out, "\nroot = \"/r\"") != 1 {
		t.Errorf("unexpected rendering:\n%s", out)
	}
}
