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
// the cache with a live read that is cheap: the names and resource versions
// of every IPInstance (metav1.PartialObjectMetadataList, which the API
// server serves as protobuf even for a custom resource). A cached record is
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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// fencePage is the page size of the live list of names and versions.
const fencePage = 10000

// maxFenceGets is how many names may differ between the cache and the live
// list before one live list of every record is cheaper than Gets.
var maxFenceGets = 2000

// fenced is what the rebuild read: the records, and how many of them were
// read live (by Get, or all of them when the cache was too far behind).
type fenced struct {
	items []estuaryv1.IPInstance
	live  int
}

// readRecords returns every IPInstance the API server holds, read from the
// cache and fenced by a live list of versions (see the note at the top).
func (r *Reconciler) readRecords(ctx context.Context) (fenced, error) {
	versions, err := r.liveVersions(ctx)
	if err != nil {
		return fenced{}, err
	}
	var cached estuaryv1.IPInstanceList
	if err := r.Client.List(ctx, &cached, client.UnsafeDisableDeepCopy); err != nil {
		return fenced{}, fmt.Errorf("list ipinstances from the cache: %w", err)
	}
	keep, fetch := fence(versions, cached.Items)
	if len(fetch) > maxFenceGets {
		var list estuaryv1.IPInstanceList
		if err := r.APIReader.List(ctx, &list); err != nil {
			return fenced{}, fmt.Errorf("list ipinstances: %w", err)
		}
		return fenced{items: list.Items, live: len(list.Items)}, nil
	}
	for _, name := range fetch {
		ipi := estuaryv1.IPInstance{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, &ipi); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fenced{}, fmt.Errorf("get ipinstance %s: %w", name, err)
		}
		keep = append(keep, ipi)
	}
	return fenced{items: keep, live: len(fetch)}, nil
}

// liveVersions lists the name and resource version of every IPInstance
// from the API server, page by page (one consistent snapshot).
func (r *Reconciler) liveVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(estuaryv1.GroupVersion.WithKind("IPInstanceList"))
	for cont := ""; ; {
		if err := r.APIReader.List(ctx, list, client.Limit(fencePage), client.Continue(cont)); err != nil {
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
