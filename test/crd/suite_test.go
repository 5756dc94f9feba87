package crd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or point it at the "+
			"directory printed by `hack/kube-binaries.sh kube-apiserver kubectl etcd`")
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest: %v\n", err)
		// Start may fail after launching etcd and kube-apiserver (e.g. when a
		// CRD is refused); stop them so nothing outlives the test.
		_ = env.Stop()
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
		}
	}()
	c, err := client.New(cfg, client.Options{Scheme: runtime.NewScheme()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		return 1
	}
	// Strict: a field the schema does not know fails the write instead of
	// being pruned, so a misplaced field in a test case cannot pass silently.
	k8s = client.WithFieldValidation(c, metav1.FieldValidationStrict)
	return m.Run()
}

// ctx returns a context bounded so that a hung API call fails the test
// instead of stalling the suite.
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// decode parses one YAML object.
func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatalf("parse test object: %v\n%s", err, doc)
	}
	return obj
}

// decodeAll parses a multi-document YAML stream.
func decodeAll(t *testing.T, data string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(data, "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		objs = append(objs, decode(t, doc))
	}
	return objs
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

// cleanup deletes obj when the test ends.
func cleanup(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := k8s.Delete(c, obj.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	})
}

// requireInvalid asserts err is an Invalid API error whose text names the
// field and carries the message.
func requireInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection of %s with %q", field, message)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error is not Invalid (status %v): %v", apierrors.ReasonForError(err), err)
	}
	text := err.Error()
	if !strings.Contains(text, field) {
		t.Errorf("error does not name field %q: %s", field, text)
	}
	if !strings.Contains(text, message) {
		t.Errorf("error does not say %q: %s", message, text)
	}
}
