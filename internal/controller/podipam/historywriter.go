package podipam

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// historyWriter writes queued history entries into the IPHistories (see
// history.go), one write per address with entries queued, in the
// background. It is a leader-only runnable.
type historyWriter struct {
	writer   client.Writer // IPHistory writes
	reader   client.Reader // IPHistory reads, from the API server
	opts     HistoryOptions
	failures prometheus.Counter
	now      func() time.Time

	mu      sync.Mutex
	pending map[string][]estuaryv1.AddressHistoryEntry // by address
	wake    chan struct{}
}

// maxPendingAddresses bounds the queue: past it, new entries are dropped
// and counted as failures.
const maxPendingAddresses = 100000

// historyRetryFirst and historyRetryLast bound the backoff between failed
// writes.
const (
	historyRetryFirst = time.Second
	historyRetryLast  = time.Minute
)

func newHistoryWriter(w client.Writer, r client.Reader, opts HistoryOptions, failures prometheus.Counter) *historyWriter {
	return &historyWriter{writer: w, reader: r, opts: opts.withDefaults(), failures: failures, now: time.Now,
		pending: map[string][]estuaryv1.AddressHistoryEntry{}, wake: make(chan struct{}, 1)}
}

// add queues e for addr; it never blocks.
func (w *historyWriter) add(e estuaryv1.AddressHistoryEntry, addr string) {
	w.mu.Lock()
	q, ok := w.pending[addr]
	if !ok && len(w.pending) >= maxPendingAddresses {
		w.mu.Unlock()
		w.failures.Inc()
		return
	}
	q = append(q, e)
	if len(q) > w.opts.MaxEntries {
		q = q[len(q)-w.opts.MaxEntries:]
	}
	w.pending[addr] = q
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Start writes queued entries until ctx ends, and sweeps every history
// every SweepInterval.
func (w *historyWriter) Start(ctx context.Context) error {
	sweep := time.NewTicker(w.opts.SweepInterval)
	defer sweep.Stop()
	retry := time.NewTimer(0)
	<-retry.C
	backoff, waiting := historyRetryFirst, false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
			if waiting { // a failed write's retry comes first; new entries wait for it
				continue
			}
		case <-retry.C:
			waiting = false
		case <-sweep.C:
			if err := w.sweep(ctx); err != nil {
				log.FromContext(ctx).Error(err, "trim address histories")
			}
			continue
		}
		if w.flush(ctx) {
			backoff = historyRetryFirst
			continue
		}
		retry.Reset(backoff)
		waiting, backoff = true, min(2*backoff, historyRetryLast)
	}
}

// flush writes every queued address once; a failed one goes back to the
// queue. It reports whether all writes succeeded.
func (w *historyWriter) flush(ctx context.Context) bool {
	w.mu.Lock()
	batch := w.pending
	w.pending = map[string][]estuaryv1.AddressHistoryEntry{}
	w.mu.Unlock()
	failed := 0
	var first error
	for addr, entries := range batch {
		if err := w.write(ctx, addr, entries); err != nil {
			failed++
			first = cmp.Or(first, err)
			w.failures.Inc()
			w.requeue(addr, entries)
		}
	}
	if failed > 0 {
		log.FromContext(ctx).Error(first, "write address histories; will retry", "failed", failed, "of", len(batch))
	}
	return failed == 0
}

// requeue puts entries back before those queued since.
func (w *historyWriter) requeue(addr string, entries []estuaryv1.AddressHistoryEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := append(entries, w.pending[addr]...)
	if len(q) > w.opts.MaxEntries {
		q = q[len(q)-w.opts.MaxEntries:]
	}
	w.pending[addr] = q
}

// write merges entries into addr's IPHistory, creating it if need be.
func (w *historyWriter) write(ctx context.Context, addr string, entries []estuaryv1.AddressHistoryEntry) error {
	name, err := historyName(addr)
	if err != nil {
		return err
	}
	var last error
	for range writeAttempts {
		h := &estuaryv1.IPHistory{}
		err := w.reader.Get(ctx, client.ObjectKey{Name: name}, h)
		switch {
		case apierrors.IsNotFound(err):
			h = &estuaryv1.IPHistory{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: estuaryv1.IPHistorySpec{Address: addr}}
			mergeEntries(h, entries, w.opts, w.now())
			err = w.writer.Create(ctx, h)
			if apierrors.IsAlreadyExists(err) {
				last = err
				continue
			}
		case err != nil:
			return fmt.Errorf("get iphistory %s: %w", name, err)
		default:
			if !mergeEntries(h, entries, w.opts, w.now()) {
				return nil
			}
			err = w.writer.Update(ctx, h)
			if apierrors.IsConflict(err) {
				last = err
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("write iphistory %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("write iphistory %s after %d tries: %w", name, writeAttempts, last)
}

// mergeEntries adds the entries h does not have yet, in time order, and
// trims h; it reports whether h changed.
func mergeEntries(h *estuaryv1.IPHistory, entries []estuaryv1.AddressHistoryEntry, opts HistoryOptions, now time.Time) bool {
	changed := false
	for _, e := range entries {
		if slices.ContainsFunc(h.Spec.Entries, func(x estuaryv1.AddressHistoryEntry) bool { return x.ID == e.ID }) {
			continue
		}
		h.Spec.Entries = append(h.Spec.Entries, e)
		changed = true
	}
	slices.SortStableFunc(h.Spec.Entries, func(a, b estuaryv1.AddressHistoryEntry) int { return a.Time.Compare(b.Time.Time) })
	return trimEntries(h, opts, now) || changed
}

// trimEntries drops h's entries older than MaxAge and all but the newest
// MaxEntries; it reports whether any went.
func trimEntries(h *estuaryv1.IPHistory, opts HistoryOptions, now time.Time) bool {
	n := len(h.Spec.Entries)
	cutoff := now.Add(-opts.MaxAge)
	h.Spec.Entries = slices.DeleteFunc(h.Spec.Entries, func(e estuaryv1.AddressHistoryEntry) bool { return e.Time.Time.Before(cutoff) })
	if len(h.Spec.Entries) > opts.MaxEntries {
		h.Spec.Entries = slices.Delete(h.Spec.Entries, 0, len(h.Spec.Entries)-opts.MaxEntries)
	}
	return len(h.Spec.Entries) != n
}

// sweep trims every IPHistory, a page at a time, and deletes those left
// empty.
func (w *historyWriter) sweep(ctx context.Context) error {
	now := w.now()
	cont := ""
	for {
		var list estuaryv1.IPHistoryList
		if err := w.reader.List(ctx, &list, client.Limit(500), client.Continue(cont)); err != nil {
			return fmt.Errorf("list iphistories: %w", err)
		}
		for i := range list.Items {
			h := &list.Items[i]
			if !trimEntries(h, w.opts, now) {
				continue
			}
			var err error
			if len(h.Spec.Entries) == 0 {
				uid, rv := h.UID, h.ResourceVersion
				err = w.writer.Delete(ctx, h, client.Preconditions{UID: &uid, ResourceVersion: &rv})
			} else {
				err = w.writer.Update(ctx, h)
			}
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("trim iphistory %s: %w", h.Name, err)
			}
		}
		if cont = list.Continue; cont == "" {
			return nil
		}
	}
}
