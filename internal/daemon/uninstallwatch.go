package daemon

// Uninstall only when asked.
//
// The daemon stops for many reasons: its pod is replaced (an upgrade, a
// changed value, an eviction), its node drains, its DaemonSet is deleted
// (`kubectl delete ds`, a GitOps prune, a delete-and-re-create, a
// `--cascade=orphan`), or estuary is uninstalled. None of these is a
// reason to take estuary off the node: pods keep their data path while no
// daemon runs, and a daemon that cleaned its node because its DaemonSet
// went away would cut every pod of the cluster off the network on a
// routine operation. So a stop never removes anything, and the absence of
// the DaemonSet is never read as an uninstall.
//
// Uninstalling is an explicit act: the annotation
// networking.estuary.io/uninstall on the daemon's DaemonSet (api/v1
// AnnotationUninstallRequest), set by the chart's pre-delete hook or by
// `kubectl estuary uninstall` (package internal/uninstall). Each daemon
// watches that one object from its start. On a request it stops serving
// (the CNI server and the data-path loop end, as on a stop), takes estuary
// off its node (uninstall.go), answers on its Node (AnnotationUninstalled,
// with the request's name and any error) and then waits: it starts nothing
// again while the request stands, even across restarts, since a daemon
// that starts under a request only removes and answers. When the request
// is withdrawn (the annotation removed) the daemon exits, and its restart
// installs estuary again. When the DaemonSet is deleted the request is
// kept as last seen: a deletion is not a withdrawal.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// uninstallSyncTimeout bounds the watch's first list at start.
const uninstallSyncTimeout = 30 * time.Second

// UninstallWatch follows the uninstall request on the daemon's DaemonSet.
type UninstallWatch struct {
	ns, name string
	cs       kubernetes.Interface

	mu      sync.Mutex
	request string
	changed chan struct{} // closed and replaced at every change of request
}

// ParseDaemonSetRef splits NAMESPACE/NAME (--daemonset).
func ParseDaemonSetRef(ref string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--daemonset %q: want NAMESPACE/NAME", ref)
	}
	return ns, name, nil
}

// WatchUninstall starts following the DaemonSet ref (NAMESPACE/NAME) until
// ctx ends, and returns once its first list is in, so that a daemon that
// starts under a request sees it before it installs anything. A DaemonSet
// that is not there is no error (it may be re-created): there is then no
// request.
func WatchUninstall(ctx context.Context, kube *rest.Config, ref string) (*UninstallWatch, error) {
	ns, name, err := ParseDaemonSetRef(ref)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(kube)
	if err != nil {
		return nil, fmt.Errorf("watch DaemonSet %s: %w", ref, err)
	}
	w := &UninstallWatch{ns: ns, name: name, cs: cs, changed: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	inf := f.Apps().V1().DaemonSets().Informer()
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.observe,
		UpdateFunc: func(_, obj any) { w.observe(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch DaemonSet %s: %w", ref, err)
	}
	f.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, uninstallSyncTimeout)
	defer cancel()
	// The handler's sync, not only the informer's: the first list has then
	// reached observe.
	if !toolscache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced) {
		return nil, fmt.Errorf("watch DaemonSet %s: not listed within %s", ref, uninstallSyncTimeout)
	}
	return w, nil
}

// observe takes the request from a DaemonSet's annotations.
func (w *UninstallWatch) observe(obj any) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return
	}
	w.set(ds.Annotations[estuaryv1.AnnotationUninstallRequest])
}

func (w *UninstallWatch) set(request string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if request == w.request {
		return
	}
	w.request = request
	close(w.changed)
	w.changed = make(chan struct{})
}

// Request returns the standing request's name, or "" when there is none,
// and a channel closed when it changes.
func (w *UninstallWatch) Request() (string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.request, w.changed
}

// ErrUninstallWithdrawn is returned by RunUnlessUninstalled when the
// request it answered was withdrawn: the daemon exits, and its restart
// installs estuary again.
var ErrUninstallWithdrawn = errors.New("the uninstall request was withdrawn: restart to install estuary again")
