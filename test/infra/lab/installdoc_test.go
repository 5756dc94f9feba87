package lab

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func checkoutRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, InstallDocPath)); err != nil {
		t.Fatalf("checkout root: %v", err)
	}
	return root
}

// TestInstallGuideHasEveryKubeadmStep reads the real docs/install.md: every
// step the kubeadm lab runs is there, and the one-command steps expand to
// the commands the lab runs.
func TestInstallGuideHasEveryKubeadmStep(t *testing.T) {
	d, err := ReadInstallDoc(checkoutRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"POD_CIDR": "10.78.0.0/16", "CONTROL_PLANE": "10.77.0.11", "TOKEN": "abcdef.0123456789abcdef",
		"CA_CERT_HASH": "sha256:00"}
	init, err := d.Command(DocKubeadmInit, "kubeadm", vars)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(init, " "); got != "kubeadm init --pod-network-cidr=10.78.0.0/16" {
		t.Errorf("init = %q", got)
	}
	join, err := d.Command(DocKubeadmJoin, "kubeadm", vars)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(join, " "); got != "kubeadm join 10.77.0.11:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:00" {
		t.Errorf("join = %q", got)
	}
	if !strings.Contains(d[DocEstuaryInstall], "helm install estuary oci://${REGISTRY}/charts/estuary") {
		t.Errorf("install step does not install the released chart:\n%s", d[DocEstuaryInstall])
	}
}

func TestParseInstallDocRefusesWhatTheLabCannotRun(t *testing.T) {
	for name, text := range map[string]string{
		"no block":         "<!-- lab-runs: a -->\ntext\n",
		"unclosed":         "<!-- lab-runs: a -->\n```sh\necho\n",
		"twice":            "<!-- lab-runs: a -->\n```sh\necho\n```\n<!-- lab-runs: a -->\n```sh\necho\n```\n",
		"unknown variable": "<!-- lab-runs: a -->\n```sh\necho $HOME\n```\n",
	} {
		if _, err := ParseInstallDoc(text); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	d, err := ParseInstallDoc("  <!-- lab-runs: a -->\n\n   ```sh\n   kubeadm init; rm -rf /\n   ```\n")
	if err != nil {
		t.Fatal(err)
	}
	if d["a"] != "kubeadm init; rm -rf /\n" {
		t.Errorf("dedent: %q", d["a"])
	}
	if _, err := d.Command("a", "kubeadm", nil); err == nil {
		t.Error("a command with ; was taken as one plain command")
	}
}

func TestParseKubeadmFlagsEnv(t *testing.T) {
	got, err := ParseKubeadmFlagsEnv("KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10.2\"\n")
	if err != nil || len(got) != 2 || got[1] != "--pod-infra-container-image=registry.k8s.io/pause:3.10.2" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"", "KUBELET_KUBEADM_ARGS=--x", "OTHER=\"--x\""} {
		if _, err := ParseKubeadmFlagsEnv(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestReadmeQuickStartIsTheInstallGuide: every block of README.md's quick
// start marked lab-runs is the install guide's block of that step, word for
// word, so the quick start runs whenever the kubeadm lab runs the guide.
func TestReadmeQuickStartIsTheInstallGuide(t *testing.T) {
	root := checkoutRoot(t)
	guide, err := ReadInstallDoc(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := ParseInstallDoc(string(b))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(readme) < 3 {
		t.Fatalf("README.md marks %d lab-runs blocks, want the quick start's", len(readme))
	}
	for step, block := range readme {
		if guide[step] != block {
			t.Errorf("README.md step %s differs from %s:\n%s\nguide:\n%s", step, InstallDocPath, block, guide[step])
		}
	}
}
