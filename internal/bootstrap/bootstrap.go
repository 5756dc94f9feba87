package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Load reads the objects of every *.yaml and *.yml file directly in dir, in
// file name order and, within a file, in document order. Files whose names
// start with a dot (a mounted ConfigMap's ..data links) are skipped. An
// object without apiVersion, kind or name fails Load.
func Load(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read bootstrap directory: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
			continue
		}
		p := filepath.Join(dir, name)
		// Stat follows the link a mounted ConfigMap's keys are.
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Clean(p))
		if err != nil {
			return nil, fmt.Errorf("read bootstrap file: %w", err)
		}
		in, err := Decode(b)
		if err != nil {
			return nil, fmt.Errorf("bootstrap file %s: %w", p, err)
		}
		objs = append(objs, in...)
	}
	return objs, nil
}

// Decode parses a YAML stream of objects, skipping empty documents.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion %q, kind %q, metadata.name %q: all three are required",
				i, o.GetAPIVersion(), o.GetKind(), o.GetName())
		}
		objs = append(objs, o)
	}
}

// Owner names a cluster-scoped object every created object is owned by.
type Owner struct {
	GroupVersionKind schema.GroupVersionKind
	Name             string
}

func (o Owner) String() string {
	return fmt.Sprintf("%s %s", o.GroupVersionKind.Kind, o.Name)
}

// EventRecorder records events about the created objects.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Creator creates Objects once Wait is closed. It is a manager Runnable
// that needs leader election: only the leader creates.
type Creator struct {
	// Client creates the objects.
	Client client.Client
	// Reader reads them and the owner live (not from a cache).
	Reader client.Reader
	// Objects are created in order, each only once the one before exists.
	Objects []*unstructured.Unstructured
	// Owner, when set, is looked up and added as the controller-less owner
	// of every created object. It must be cluster-scoped, like the objects.
	Owner *Owner
	// Wait is closed once creating may start (the webhook serves); nil
	// starts at once.
	Wait <-chan struct{}
	// Events, when set, records what was created and what failed.
	Events EventRecorder
	// Log logs every step.
	Log logr.Logger
	// Backoff is the first delay between attempts (0: 500ms); it doubles
	// up to MaxBackoff (0: 30s).
	Backoff, MaxBackoff time.Duration

	done chan struct{}
}

// Outcomes of Ensure.
const (
	Created = "created"
	Existed = "existed"
)

// NeedLeaderElection makes Creator run on the leader only.
func (c *Creator) NeedLeaderElection() bool { return true }

// Done is closed once every object exists.
func (c *Creator) Done() <-chan struct{} {
	c.init()
	return c.done
}

func (c *Creator) init() {
	if c.done == nil {
		c.done = make(chan struct{})
	}
}

// Start waits for Wait, then ensures every object in order, retrying each
// with backoff. It returns nil once all exist, or when ctx ends.
func (c *Creator) Start(ctx context.Context) error {
	c.init()
	if c.Wait != nil {
		select {
		case <-c.Wait:
		case <-ctx.Done():
			return nil
		}
	}
	for _, obj := range c.Objects {
		if !c.retry(ctx, obj) {
			return nil
		}
	}
	c.Log.Info("bootstrap objects in place", "count", len(c.Objects))
	close(c.done)
	return nil
}

// retry ensures obj until it exists; false when ctx ended first.
func (c *Creator) retry(ctx context.Context, obj *unstructured.Unstructured) bool {
	delay, maxDelay := c.Backoff, c.MaxBackoff
	if delay <= 0 {
		delay = 500 * time.Millisecond
	}
	if maxDelay <= 0 {
		maxDelay = 30 * time.Second
	}
	lastErr := ""
	for attempt := 1; ; attempt++ {
		outcome, err := c.Ensure(ctx, obj)
		if err == nil {
			c.report(obj, outcome)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.Log.Info("bootstrap object not created yet; retrying", "kind", obj.GetKind(), "name", obj.GetName(),
			"attempt", attempt, "retryIn", delay.String(), "error", err.Error())
		if c.Events != nil && err.Error() != lastErr {
			c.Events.Eventf(obj, nil, corev1.EventTypeWarning, "BootstrapFailed", "Create", "%v", err)
		}
		lastErr = err.Error()
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		delay = min(2*delay, maxDelay)
	}
}

func (c *Creator) report(obj *unstructured.Unstructured, outcome string) {
	if outcome == Existed {
		c.Log.Info("bootstrap object exists; left as it is", "kind", obj.GetKind(), "name", obj.GetName())
		return
	}
	c.Log.Info("bootstrap object created", "kind", obj.GetKind(), "name", obj.GetName())
	if c.Events != nil {
		c.Events.Eventf(obj, nil, corev1.EventTypeNormal, "BootstrapCreated", "Create",
			"created %s %s from the release's bootstrap objects", obj.GetKind(), obj.GetName())
	}
}

// Ensure creates obj unless an object of its kind and name exists, and
// says which it found (Created or Existed). It never changes an existing
// object. obj is not modified.
func (c *Creator) Ensure(ctx context.Context, obj *unstructured.Unstructured) (string, error) {
	what := obj.GetKind() + " " + obj.GetName()
	if obj.GetNamespace() != "" {
		what = obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	probe := &metav1.PartialObjectMetadata{}
	probe.SetGroupVersionKind(obj.GroupVersionKind())
	switch err := c.Reader.Get(ctx, client.ObjectKeyFromObject(obj), probe); {
	case err == nil:
		return Existed, nil
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("bootstrap: get %s: %w", what, err)
	}
	create := obj.DeepCopy()
	if c.Owner != nil {
		ref, err := c.ownerRef(ctx)
		if err != nil {
			return "", fmt.Errorf("bootstrap: %s: %w", what, err)
		}
		refs := create.GetOwnerReferences()
		if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == ref.UID }) {
			create.SetOwnerReferences(append(refs, ref))
		}
	}
	switch err := c.Client.Create(ctx, create); {
	case err == nil:
		return Created, nil
	case apierrors.IsAlreadyExists(err):
		return Existed, nil
	default:
		return "", fmt.Errorf("bootstrap: create %s: %w", what, err)
	}
}

// ownerRef reads the owner and returns a reference to it.
func (c *Creator) ownerRef(ctx context.Context) (metav1.OwnerReference, error) {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(c.Owner.GroupVersionKind)
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: c.Owner.Name}, o); err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("get owner %s: %w", c.Owner, err)
	}
	apiVersion, kind := c.Owner.GroupVersionKind.ToAPIVersionAndKind()
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: o.Name, UID: o.UID,
		BlockOwnerDeletion: ptr.To(false)}, nil
}

// ParseOwner parses "<kind>.<group>/<name>" (e.g.
// "ClusterRole.rbac.authorization.k8s.io/estuary-manager"; core kinds have
// no ".<group>") and resolves the kind's version with mapper, which must
// say it is cluster-scoped.
func ParseOwner(s string, mapper meta.RESTMapper) (*Owner, error) {
	kindGroup, name, ok := strings.Cut(s, "/")
	if !ok || kindGroup == "" || name == "" {
		return nil, fmt.Errorf("bootstrap owner %q: want <kind>.<group>/<name>", s)
	}
	gk := schema.ParseGroupKind(kindGroup)
	m, err := mapper.RESTMapping(gk)
	if err != nil {
		return nil, fmt.Errorf("bootstrap owner %q: %w", s, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameRoot {
		return nil, fmt.Errorf("bootstrap owner %q: %s is namespaced; cluster-scoped objects can only be owned by cluster-scoped ones", s, gk)
	}
	return &Owner{GroupVersionKind: m.GroupVersionKind, Name: name}, nil
}
