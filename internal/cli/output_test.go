package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// outputRecords creates two namespaces with one record each in subnet
// cli-output, and returns the namespaces.
func outputRecords(t *testing.T) (string, string) {
	t.Helper()
	subnetWithStatus(t, "cli-output", "10.97.0.0/24", 254, 2)
	a, b := namespace(t), namespace(t)
	recordFor(t, "10.97.0.2/24", "cli-output", a, "pa", "uid-a", estuaryv1.OwnerReference{Kind: "Pod", Name: "pa"}, estuaryv1.IPInstanceBound)
	recordFor(t, "10.97.0.3/24", "cli-output", b, "pb", "uid-b", estuaryv1.OwnerReference{Kind: "Pod", Name: "pb"}, estuaryv1.IPInstanceBound)
	return a, b
}

func TestGetPrintsObjectsInEveryKubectlFormat(t *testing.T) {
	a, _ := outputRecords(t)

	out, err := run(t, "", "get", "ip", "10.97.0.2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ipi estuaryv1.IPInstance
	if err := json.Unmarshal([]byte(out), &ipi); err != nil {
		t.Fatalf("-o json is not an IPInstance: %v\n%s", err, out)
	}
	if ipi.Kind != "IPInstance" || ipi.APIVersion != estuaryv1.GroupVersion.String() || ipi.Spec.Address.IP != "10.97.0.2/24" {
		t.Errorf("-o json: kind %q apiVersion %q address %q", ipi.Kind, ipi.APIVersion, ipi.Spec.Address.IP)
	}

	out, err = run(t, "", "get", "ip", "10.97.0.2", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	ipi = estuaryv1.IPInstance{}
	if err := yaml.Unmarshal([]byte(out), &ipi); err != nil || ipi.Spec.Binding.PodName != "pa" {
		t.Errorf("-o yaml: pod %q, err %v\n%s", ipi.Spec.Binding.PodName, err, out)
	}

	out, err = run(t, "", "get", "ips", "-n", a, "-o", "jsonpath={.items[*].spec.address.ip}")
	if err != nil {
		t.Fatal(err)
	}
	if out != "10.97.0.2/24" {
		t.Errorf("get ips -n %s -o jsonpath: %q, want only the namespace's address", a, out)
	}

	out, err = run(t, "", "subnets", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "subnet.networking.estuary.io/cli-output")

	out, err = run(t, "", "-n", a, "get", "workload", "pod/pa", "-o", "go-template={{range .items}}{{.spec.binding.podName}}{{end}}")
	if err != nil || out != "pa" {
		t.Errorf("get workload -o go-template: %q, %v", out, err)
	}
}

func TestGetTablesWideAndAllNamespaces(t *testing.T) {
	a, b := outputRecords(t)

	out, err := run(t, "", "get", "ips", "-A", "-l", estuaryv1.LabelSubnet+"=cli-output")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "NAMESPACE", a, b, "10.97.0.2/24", "10.97.0.3/24")

	out, err = run(t, "", "get", "ips", "-n", b, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "NETWORK", "OWNER", "RECORD", "net-cli-output", "Pod/pb", "10.97.0.3/24")
	if strings.Contains(out, "10.97.0.2") || strings.Contains(out, "NAMESPACE") {
		t.Errorf("get ips -n %s lists another namespace's record or a namespace column:\n%s", b, out)
	}

	out, err = run(t, "", "subnets", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "GATEWAY", "NAT", "PRIVATE", "cli-output", "default")
}

func TestBadOutputFormatNamesTheFormats(t *testing.T) {
	for _, args := range [][]string{{"get", "ips", "-o", "xml"}, {"subnets", "-o", "xml"}, {"get", "ip", "10.97.0.2", "-o", "xml"}} {
		_, err := run(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "xml") || !strings.Contains(err.Error(), "jsonpath") {
			t.Errorf("%v: %v, want an error naming -o xml and the allowed formats", args, err)
		}
	}
	for _, args := range [][]string{{"check", "-o", "xml"}, {"version", "-o", "xml"}} {
		_, err := run(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "text, json or yaml") {
			t.Errorf("%v: %v, want an error naming text, json or yaml", args, err)
		}
	}
}

// writeKubeconfig writes a kubeconfig for the test API server with one
// context, "estuary-test", whose namespace is ns.
func writeKubeconfig(t *testing.T, c *rest.Config, ns string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	kc.Contexts["estuary-test"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: ns}
	kc.CurrentContext = "estuary-test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runWithKubeconfig runs the plugin as a user would: its configuration
// from kubectl's flags, nothing injected.
func runWithKubeconfig(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, nil)
	root.SetArgs(args)
	err := root.ExecuteContext(bg())
	return out.String(), errOut.String(), err
}

func TestKubectlGlobalFlags(t *testing.T) {
	a, b := outputRecords(t)
	kc := writeKubeconfig(t, cfg, b)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())

	// The context's namespace is the default; -n overrides it.
	out, _, err := runWithKubeconfig(t, "--kubeconfig", kc, "get", "ips")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "10.97.0.3/24")
	out, _, err = runWithKubeconfig(t, "--kubeconfig", kc, "--context", "estuary-test", "-n", a, "get", "ips")
	if err != nil || !strings.Contains(out, "10.97.0.2/24") || strings.Contains(out, "10.97.0.3") {
		t.Errorf("-n %s: %v\n%s", a, err, out)
	}
	// --as impersonates, as kubectl does: a user without RBAC is refused.
	_, _, err = runWithKubeconfig(t, "--kubeconfig", kc, "--context", "estuary-test", "--as", "nobody", "get", "ips")
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("--as nobody: %v, want forbidden", err)
	}
	// --server points elsewhere: the error names the refused connection.
	_, _, err = runWithKubeconfig(t, "--kubeconfig", kc, "--context", "estuary-test", "--server", "https://127.0.0.1:1", "--request-timeout", "5s", "get", "ips")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("--server https://127.0.0.1:1: %v, want a connection error naming it", err)
	}
	// Shell completion of -n lists the cluster's namespaces.
	out, _, err = runWithKubeconfig(t, "--kubeconfig", kc, "__complete", "get", "ips", "-n", "")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, a, b)
	out, _, err = runWithKubeconfig(t, "--kubeconfig", kc, "__complete", "--context", "")
	if err != nil {
		t.Fatal(err)
	}
	requireIn(t, out, "estuary-test")
	out, _, err = runWithKubeconfig(t, "completion", "bash")
	if err != nil || !strings.Contains(out, "__start_kubectl-estuary") {
		t.Errorf("completion bash: %v, %d bytes", err, len(out))
	}
}

func TestConfirmationPromptGoesToStderr(t *testing.T) {
	ns := namespace(t)
	subnetWithStatus(t, "cli-prompt", "10.97.1.0/24", 254, 1)
	recordFor(t, "10.97.1.5/24", "cli-prompt", ns, "gone", "", estuaryv1.OwnerReference{Kind: "StatefulSet", Name: "db"}, estuaryv1.IPInstanceRetained)
	var out, errOut bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader("n\n"), Out: &out, Err: &errOut}, func() (*rest.Config, error) { return cfg, nil })
	root.SetArgs([]string{"release", "10.97.1.5"})
	_ = root.ExecuteContext(bg())
	if !strings.Contains(errOut.String(), "[y/N]") || strings.Contains(out.String(), "[y/N]") {
		t.Errorf("prompt: stdout %q, stderr %q; want it on stderr only", out.String(), errOut.String())
	}
}
