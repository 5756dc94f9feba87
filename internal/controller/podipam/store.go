package podipam

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// recordStore is where the ledger, the pod controller and the pool
// controller read and write IPInstances: the records are the API server's,
// so every write of one goes through these methods. Reads come from the
// manager's cache unless they say live; a write's conditions (who must hold
// the record) are the caller's (records.go), the store only carries them.
// clientStore is the real one; envtest runs every path through it.
type recordStore interface {
	// Get reads the record name from the cache.
	Get(ctx context.Context, name string) (*estuaryv1.IPInstance, error)
	// GetLive reads the record name from the API server.
	GetLive(ctx context.Context, name string) (*estuaryv1.IPInstance, error)
	// HeldBy lists, from the cache, the records held under key (recordKey).
	HeldBy(ctx context.Context, key string) ([]estuaryv1.IPInstance, error)
	// Create stores a new record.
	Create(ctx context.Context, ipi *estuaryv1.IPInstance) error
	// Update writes ipi over the record at ipi's resourceVersion.
	Update(ctx context.Context, ipi *estuaryv1.IPInstance) error
	// Delete deletes the record if it still has ipi's UID and
	// resourceVersion.
	Delete(ctx context.Context, ipi *estuaryv1.IPInstance) error
}

// indexRecordKey indexes IPInstances by recordKey in the manager's cache.
const indexRecordKey = "podipam.recordKey"

// clientStore is the recordStore of a controller-runtime client: cached
// reads and writes through cache, live reads through live.
type clientStore struct {
	cache client.Client
	live  client.Reader
}

func (s clientStore) Get(ctx context.Context, name string) (*estuaryv1.IPInstance, error) {
	ipi := &estuaryv1.IPInstance{}
	return ipi, s.cache.Get(ctx, client.ObjectKey{Name: name}, ipi)
}

func (s clientStore) GetLive(ctx context.Context, name string) (*estuaryv1.IPInstance, error) {
	ipi := &estuaryv1.IPInstance{}
	return ipi, s.live.Get(ctx, client.ObjectKey{Name: name}, ipi)
}

func (s clientStore) HeldBy(ctx context.Context, key string) ([]estuaryv1.IPInstance, error) {
	var list estuaryv1.IPInstanceList
	err := s.cache.List(ctx, &list, client.MatchingFields{indexRecordKey: key}, client.UnsafeDisableDeepCopy)
	return list.Items, err
}

func (s clientStore) Create(ctx context.Context, ipi *estuaryv1.IPInstance) error {
	return s.cache.Create(ctx, ipi)
}

func (s clientStore) Update(ctx context.Context, ipi *estuaryv1.IPInstance) error {
	return s.cache.Update(ctx, ipi)
}

func (s clientStore) Delete(ctx context.Context, ipi *estuaryv1.IPInstance) error {
	uid, rv := ipi.UID, ipi.ResourceVersion
	return s.cache.Delete(ctx, ipi, client.Preconditions{UID: &uid, ResourceVersion: &rv})
}
