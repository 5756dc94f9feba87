package podipam

// The records the rebuild starts from.
//
// The allocator must start from every record the API server holds: a record
// a previous leader wrote just before it died, and that the new leader did
// not read, is an address handed out twice. Reading every IPInstance live
// gives that, but at 100,000 records it is the second full read of the
// manager's start (the informer cache reads them all as well), and decoding
// JSON is most of a cold start: a custom resource has no protobuf.
//
// So the rebuild reads the records once, from the informer cache, and fences
// the cache first with a write. It patches one record (the first by name)
// with AnnotationFence and waits until its cache holds that record at the
// version the write returned, or a later one. An informer applies a
// resource's changes in the order of their versions, so a cache that holds
// the write holds every change made to IPInstances before it: what a live
// list would have returned at the write, or newer. One write and a wait of
// a watch event's latency, whatever the number of records.
//
// When that cannot be done (the cache holds no record to write, the write
// fails, or the cache does not show it within fenceWait), the cache is
// fenced with a live read that is cheap for the manager: the names and
// resource versions of every IPInstance (metav1.PartialObjectMetadataList,
// which the API server serves as protobuf even for a custom resource; it
// costs the API server most of what a list of the records does, the
// records' managed fields converted one by one). A cached record is
// taken as it is only when the live list names it at the same resource
// version. Every other name, on either side (written, created or deleted
// while the cache was catching up), is read live with a Get, and a record
// the Get does not find is left out. The result is what a live list would
// have returned, or newer. When the cache is far behind (more than
// maxFenceGets names differ), the rebuild falls back to one live list of
// every record.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// fencePage is the page size of the live list of names and versions.
const fencePage = 10000

// maxFenceGets is how many names may differ between the cache and the live
// list before one live list of every record is cheaper than Gets.
var maxFenceGets = 2000

// fenced is what the rebuild read: the records, how many of them were
// read live (by Get, or all of them when the cache was too far behind),
// and the fence ("write" or "list").
type fenced struct {
	items []estuaryv1.IPInstance
	live  int
	by    string
}

// fenceWait is how long the fence by a write waits for the cache to show
// the write before the rebuild fences the cache with a live list instead.
var fenceWait = 5 * time.Second

// recordReader reads every record as the API server holds it, from the
// cache once fenced (see the note at the top); the rebuild and the audit
// use it.
type recordReader struct {
	cache client.Client
	live  client.Reader
}

// readRecords returns every IPInstance the API server holds, read from the
// cache, fenced by a write or by a live list of versions (see the note at
// the top).
func (rr *recordReader) readRecords(ctx context.Context) (fenced, error) {
	if items, ok := rr.fenceByWrite(ctx); ok {
		return fenced{items: items, by: "write"}, nil
	}
	versions, err := rr.liveVersions(ctx)
	if err != nil {
		return fenced{}, err
	}
	var cached estuaryv1.IPInstanceList
	if err := rr.cache.List(ctx, &cached, client.UnsafeDisableDeepCopy); err != nil {
		return fenced{}, fmt.Errorf("list ipinstances from the cache: %w", err)
	}
	keep, fetch := fence(versions, cached.Items)
	if len(fetch) > maxFenceGets {
		var list estuaryv1.IPInstanceList
		if err := rr.live.List(ctx, &list); err != nil {
			return fenced{}, fmt.Errorf("list ipinstances: %w", err)
		}
		return fenced{items: list.Items, live: len(list.Items), by: "list"}, nil
	}
	for _, name := range fetch {
		ipi := estuaryv1.IPInstance{}
		switch err := rr.live.Get(ctx, client.ObjectKey{Name: name}, &ipi); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fenced{}, fmt.Errorf("get ipinstance %s: %w", name, err)
		}
		keep = append(keep, ipi)
	}
	return fenced{items: keep, live: len(fetch), by: "list"}, nil
}

// liveVersions lists the name and resource version of every IPInstance
// from the API server, page by page (one consistent snapshot).
func (rr *recordReader) liveVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(estuaryv1.GroupVersion.WithKind("IPInstanceList"))
	for cont := ""; ; {
		if err := rr.live.List(ctx, list, client.Limit(fencePage), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("list ipinstance versions: %w", err)
		}
		for i := range list.Items {
			out[list.Items[i].Name] = list.Items[i].ResourceVersion
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

// fence splits the cached records: those the live list names at the same
// resource version are kept; the names of the others, and the names the
// live list has that the cache does not, are to be read live. versions is
// consumed.
func fence(versions map[string]string, cached []estuaryv1.IPInstance) (keep []estuaryv1.IPInstance, fetch []string) {
	keep = make([]estuaryv1.IPInstance, 0, len(cached))
	for i := range cached {
		name := cached[i].Name
		rv, ok := versions[name]
		delete(versions, name)
		if ok && rv == cached[i].ResourceVersion {
			keep = append(keep, cached[i])
			continue
		}
		fetch = append(fetch, name)
	}
	for name := range versions {
		fetch = append(fetch, name)
	}
	return keep, fetch
}

// fenceByWrite patches the first cached record by name with AnnotationFence
// and waits up to fenceWait for the cache to hold it at the write's version
// or a later one (or to have seen it deleted since); then it returns every
// cached record. It reports false, and nothing, when the cache holds no
// record, the write fails or the wait ends first.
func (rr *recordReader) fenceByWrite(ctx context.Context) ([]estuaryv1.IPInstance, bool) {
	logger := log.FromContext(ctx)
	var cached estuaryv1.IPInstanceList
	if err := rr.cache.List(ctx, &cached, client.UnsafeDisableDeepCopy); err != nil || len(cached.Items) == 0 {
		return nil, false
	}
	first := slices.MinFunc(cached.Items, func(a, b estuaryv1.IPInstance) int { return strings.Compare(a.Name, b.Name) }).Name
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, estuaryv1.AnnotationFence, time.Now().UTC().Format(time.RFC3339Nano))
	marker := &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: first}}
	if err := rr.cache.Patch(ctx, marker, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		logger.Info("fence by a write failed; fencing with a live list", "record", first, "error", err.Error())
		return nil, false
	}
	written := marker.ResourceVersion
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, fenceWait, true, func(ctx context.Context) (bool, error) {
		var seen estuaryv1.IPInstance
		switch err := rr.cache.Get(ctx, client.ObjectKey{Name: first}, &seen); {
		case apierrors.IsNotFound(err):
			return true, nil // deleted after the write, and the cache has seen it
		case err != nil:
			return false, err
		}
		c, err := resourceversion.CompareResourceVersion(seen.ResourceVersion, written)
		return err == nil && c >= 0, err
	})
	if err != nil {
		logger.Info("the cache did not show the fence's write; fencing with a live list", "record", first,
			"version", written, "error", err.Error())
		return nil, false
	}
	var items estuaryv1.IPInstanceList
	if err := rr.cache.List(ctx, &items, client.UnsafeDisableDeepCopy); err != nil {
		return nil, false
	}
	return items.Items, true
}
