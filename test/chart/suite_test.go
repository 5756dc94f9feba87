package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

const (
	chartDir = "../../charts/estuary"
	// namespace is the release namespace of every render.
	namespace = "estuary-chart"
)

var (
	k8s client.Client
	// restConfig reaches the API server as its administrator.
	restConfig *rest.Config
)

func TestMain(m *testing.M) {
	// Strict: a field the schema does not know fails the write instead of being
	// pruned, so a misspelt field in a template cannot pass.
	os.Exit(testenv.Main(m, testenv.Options{CRDDirs: []string{"charts/estuary/crds"}, Strict: true}, func(cfg *rest.Config, c client.Client) (func(), error) {
		k8s, restConfig = c, cfg
		return nil, nil
	}))
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// helmBinary is $HELM or the checkout's bin/helm.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := filepath.Abs("../../bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm is not installed (%v): run `make helm`, or set HELM", err)
	}
	return h
}

// render runs `helm template` on the chart with extra arguments and returns the
// rendered objects.
func render(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderErr(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

var serverVersionOnce struct {
	sync.Once
	v   string
	err error
}

// serverVersion is the test API server's version, the cluster helm
// renders for (the chart's kubeVersion is checked against it).
func serverVersion(t *testing.T) string {
	t.Helper()
	serverVersionOnce.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
		if err != nil {
			serverVersionOnce.err = err
			return
		}
		info, err := dc.ServerVersion()
		if err != nil {
			serverVersionOnce.err = err
			return
		}
		serverVersionOnce.v = info.GitVersion
	})
	if serverVersionOnce.err != nil {
		t.Fatalf("API server version: %v", serverVersionOnce.err)
	}
	return serverVersionOnce.v
}

// renderErr is render that returns helm's failure.
func renderErr(t *testing.T, args ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "estuary", chartDir, "--namespace", namespace,
		"--kube-version", serverVersion(t)}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return nil, fmt.Errorf("parse rendered object: %w\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// valuesFile writes values into a file for helm's --values.
func valuesFile(t *testing.T, values []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, values, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// find returns the rendered object of a kind and name, failing when it is missing.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// convert turns a rendered object into a typed one.
func convert(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}
