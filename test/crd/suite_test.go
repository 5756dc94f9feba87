package crd

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	k8s  client.Client
	kube *rest.Config
)

func TestMain(m *testing.M) {
	// Strict: a field the schema does not know fails the write instead of
	// being pruned, so a misplaced field in a test case cannot pass silently.
	os.Exit(testenv.Main(m, testenv.Options{Strict: true}, func(cfg *rest.Config, c client.Client) (func(), error) {
		k8s, kube = c, cfg
		return nil, nil
	}))
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
