package daemon

// Telling an uninstall from a restart.
//
// The daemon stops on SIGTERM for three reasons: its pod is replaced (an
// upgrade, a changed value, an eviction), its node drains, or estuary is
// uninstalled. Only the last must take estuary off the node (uninstall.go);
// the others must leave the data path running. The difference is the
// daemon's DaemonSet: `helm uninstall` deletes it, and the garbage
// collector then deletes its pods. The daemon watches that one object from
// its start, so by the time its own pod is deleted it has seen the
// DaemonSet go, even though the uninstall deletes the daemon's RBAC in the
// same pass. At stop a last read decides when it can (a re-created
// DaemonSet means no removal); when the read fails the watch decides, and
// when the watch saw nothing the daemon cannot tell and keeps the node as
// it is (the safe side: `estuary-daemon uninstall` finishes the job by
// hand).

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// removalCheckTimeout bounds the last read of the DaemonSet at stop, and
// removalSyncTimeout the watch's first list at start.
const (
	removalCheckTimeout = 3 * time.Second
	removalSyncTimeout  = 30 * time.Second
)

// Removal follows the DaemonSet that runs the daemon.
type Removal struct {
	ns, name string
	cs       kubernetes.Interface
	deleted  atomic.Bool
}

// ParseDaemonSetRef splits NAMESPACE/NAME (--daemonset).
func ParseDaemonSetRef(ref string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--daemonset %q: want NAMESPACE/NAME", ref)
	}
	return ns, name, nil
}

// WatchRemoval starts following the DaemonSet ref (NAMESPACE/NAME) until ctx
// ends. The DaemonSet must exist: a daemon pointed at a DaemonSet that is
// not there would take estuary off its node at every stop.
func WatchRemoval(ctx context.Context, kube *rest.Config, ref string) (*Removal, error) {
	ns, name, err := ParseDaemonSetRef(ref)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(kube)
	if err != nil {
		return nil, fmt.Errorf("watch DaemonSet %s: %w", ref, err)
	}
	r := &Removal{ns: ns, name: name, cs: cs}
	if _, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("--daemonset %s: %w", ref, err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := f.Apps().V1().DaemonSets().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { r.observe(obj) },
		DeleteFunc: func(any) { r.deleted.Store(true) },
	}); err != nil {
		return nil, fmt.Errorf("watch DaemonSet %s: %w", ref, err)
	}
	f.Start(ctx.Done())
	// The watch counts only once its first list is in: an uninstall that
	// deletes the RBAC right after this returns must still be seen.
	syncCtx, cancel := context.WithTimeout(ctx, removalSyncTimeout)
	defer cancel()
	for typ, ok := range f.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watch DaemonSet %s: %v not listed within %s", ref, typ, removalSyncTimeout)
		}
	}
	return r, nil
}

// observe notes a DaemonSet being deleted (a foreground deletion keeps it
// until its pods are gone).
func (r *Removal) observe(obj any) {
	if ds, ok := obj.(*appsv1.DaemonSet); ok && ds.DeletionTimestamp != nil {
		r.deleted.Store(true)
	}
}

// Removed reports whether the DaemonSet was deleted. A read decides when it
// can: the DaemonSet gone (NotFound) or being deleted means removal, one
// that exists means none, even if the watch saw a deletion (the DaemonSet
// was re-created, say with --cascade=orphan, and adopted this pod). When the
// read fails (the uninstall deleted the daemon's RBAC in the same pass),
// the watch decides; if it saw nothing, the read's error is returned with
// false.
func (r *Removal) Removed(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, removalCheckTimeout)
	defer cancel()
	ds, err := r.cs.AppsV1().DaemonSets(r.ns).Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case err == nil:
		return ds.DeletionTimestamp != nil, nil
	case apierrors.IsNotFound(err):
		return true, nil
	case r.deleted.Load():
		return true, nil
	default:
		return false, fmt.Errorf("read DaemonSet %s/%s: %w", r.ns, r.name, err)
	}
}
