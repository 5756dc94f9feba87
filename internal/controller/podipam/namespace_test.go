package podipam

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// nsFaults makes reads of one namespace fail: from the manager's cached
// client (cached, as if the cache did not show it or could not answer) and
// from the reconciler's live reader (live). A nil error reads through.
type nsFaults struct {
	mu           sync.Mutex
	name         string
	cached, live error
	cachedReads  int
	liveReads    int
}

func (f *nsFaults) set(cached, live error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cached, f.live = cached, live
}

func (f *nsFaults) reads() (cached, live int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cachedReads, f.liveReads
}

// fault counts a read of key and returns the error it should fail with.
func (f *nsFaults) fault(key client.ObjectKey, obj client.Object, live bool) error {
	if _, ok := obj.(*corev1.Namespace); !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if key.Name != f.name {
		return nil
	}
	if live {
		f.liveReads++
		return f.live
	}
	f.cachedReads++
	return f.cached
}

func (f *nsFaults) wrapClient(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := f.fault(key, obj, false); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

func (f *nsFaults) wrapReader(r client.Reader) client.Reader { return faultyReader{r, f} }

type faultyReader struct {
	client.Reader
	f *nsFaults
}

func (r faultyReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.f.fault(key, obj, true); err != nil {
		return err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func notFound(name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
}

// startWithNamespaceFaults starts the controllers with reads of a new
// namespace annotated with subnet failing as faults says, and returns the
// namespace.
func startWithNamespaceFaults(t *testing.T, subnet string, cached, live error) (string, *nsFaults) {
	t.Helper()
	ns := newNamespace(t, map[string]string{estuaryv1.AnnotationSubnet: subnet})
	f := &nsFaults{name: ns, cached: cached, live: live}
	r, _ := startManagerWith(t, testManager{rc: cfg, client: f.wrapClient, apiReader: f.wrapReader})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	return ns, f
}

// TestNamespaceMissingFromCacheIsReadLive: a pod whose namespace the cache
// does not show is given the subnet its namespace's annotation names, read
// live, not the network's default subnet (a pod of a plain namespace gets
// that one).
func TestNamespaceMissingFromCacheIsReadLive(t *testing.T) {
	overlay(t, "ov-nsread", "10.121.0.0/24", "10.122.0.0/24")
	ns, f := startWithNamespaceFaults(t, "ov-nsread-1", notFound("x"), nil)
	plain := newNamespace(t, nil)
	if got := waitInstances(t, plain, newPod(t, plain, "plain").Name, 1, estuaryv1.IPInstanceBound)[0]; got.Spec.Subnet != "ov-nsread-0" {
		t.Fatalf("a pod of a plain namespace got subnet %s; the test needs the default to be ov-nsread-0", got.Spec.Subnet)
	}
	got := waitInstances(t, ns, newPod(t, ns, "p").Name, 1, estuaryv1.IPInstanceBound)[0]
	if got.Spec.Subnet != "ov-nsread-1" {
		t.Fatalf("pod of a namespace missing from the cache got subnet %s, want its namespace's ov-nsread-1", got.Spec.Subnet)
	}
	if cached, live := f.reads(); cached == 0 || live == 0 {
		t.Fatalf("namespace reads: %d cached, %d live; want both", cached, live)
	}
}

// TestNamespaceReadErrorRetriesAndAllocatesNothing: while a pod's namespace
// cannot be read (the cache fails, or it misses and the live read fails),
// the pod is tried again, a NamespaceUnreadable Event names the namespace
// and nothing is allocated; once the read succeeds the pod gets its
// namespace's subnet.
func TestNamespaceReadErrorRetriesAndAllocatesNothing(t *testing.T) {
	overlay(t, "ov-nserr", "10.123.0.0/24", "10.124.0.0/24")
	for _, c := range []struct {
		name         string
		cached, live error
	}{
		{"cache fails", apierrors.NewServiceUnavailable("cache not synced"), nil},
		{"live read fails", notFound("x"), apierrors.NewTimeoutError("etcd is slow", 1)},
		{"absent live", notFound("x"), notFound("x")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns, f := startWithNamespaceFaults(t, "ov-nserr-1", c.cached, c.live)
			newPod(t, ns, "p")
			eventually(t, "the pod tried three times", func() error {
				if cached, _ := f.reads(); cached < 3 {
					return fmt.Errorf("%d tries", cached)
				}
				return nil
			})
			if !apierrors.IsNotFound(c.live) {
				eventually(t, "NamespaceUnreadable event", func() error { return eventNote(ns, "p", ReasonNamespaceUnreadable, ns) })
			}
			if got := instancesOf(t, ns, "p"); len(got) != 0 {
				t.Fatalf("the pod was given %s while its namespace could not be read", got[0].Spec.Address.IP)
			}
			f.set(nil, nil)
			got := waitInstances(t, ns, "p", 1, estuaryv1.IPInstanceBound)[0]
			if got.Spec.Subnet != "ov-nserr-1" {
				t.Fatalf("once read, the namespace's subnet ov-nserr-1 was not used: %s", got.Spec.Subnet)
			}
		})
	}
}
