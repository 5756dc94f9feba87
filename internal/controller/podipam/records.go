package podipam

// Every change of a record's holder goes through the two functions of this
// file, in one order: the record first, memory after.
//
//   - writeBinding moves a record from the holder and phases the writer
//     expects (the pool it is taken from, the pod that lets it go) to what a
//     holding says. The update is conditional twice over: it carries the
//     resourceVersion it read, and the record it read must still be held as
//     the writer expects (or already say what the writer wants, a write
//     whose answer was lost). A record another pod or workload holds is
//     never overwritten: the write fails with a *heldElsewhere naming that
//     holder, and the caller lets memory follow the record (giveTo).
//   - deleteRecord deletes a record with the same expectation, and with
//     preconditions on its UID and resourceVersion.
//
// An answer says what the API server stored. nothingStored is a refusal
// (invalid, forbidden, gone, held elsewhere): memory stays as it was, or
// follows the record. Any other failure (a timeout, a lost connection, a
// conflict that would not settle) leaves the outcome unknown: the caller
// keeps the address held for the pod it was meant for, unconfirmed, so no
// one else can take it, until the record is read back (confirm).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// expect is what a record must say before a write changes it: held under
// one of its keys (recordKey) in one of that key's phases.
type expect []holderState

// holderState is one key a record may be held under, and its phases (any
// when none is given).
type holderState struct {
	key    string
	phases []estuaryv1.IPInstancePhase
}

// heldBy expects a record held under key in one of phases (any phase when
// none is given).
func heldBy(key string, phases ...estuaryv1.IPInstancePhase) expect {
	return expect{{key: key, phases: phases}}
}

// or adds another holder the record may have.
func (e expect) or(key string, phases ...estuaryv1.IPInstancePhase) expect {
	return append(e, holderState{key: key, phases: phases})
}

func (e expect) matches(ipi *estuaryv1.IPInstance) bool {
	k := recordKey(ipi)
	for _, h := range e {
		if h.key == k && (len(h.phases) == 0 || slices.Contains(h.phases, ipi.Status.Phase)) {
			return true
		}
	}
	return false
}

func (e expect) String() string {
	var parts []string
	for _, h := range e {
		parts = append(parts, fmt.Sprintf("%s in %v", h.key, h.phases))
	}
	return strings.Join(parts, " or ")
}

// heldElsewhere: a record is not held as a write expected it, so nothing
// was written. The record is the one read live.
type heldElsewhere struct {
	record *estuaryv1.IPInstance
	want   expect
}

func (e *heldElsewhere) Error() string {
	return fmt.Sprintf("ipinstance %s is held by %s in phase %q, not by %s; left as it is",
		e.record.Name, recordKey(e.record), e.record.Status.Phase, e.want)
}

// nothingStored: the API server answered and stored nothing.
func nothingStored(err error) bool {
	var he *heldElsewhere
	return errors.As(err, &he) || refused(err)
}

// asHeldElsewhere returns err's *heldElsewhere, if it is one.
func asHeldElsewhere(err error) (*heldElsewhere, bool) {
	var he *heldElsewhere
	ok := errors.As(err, &he)
	return he, ok
}

// writeAttempts bounds the reads and updates of one conditional write.
const writeAttempts = 3

// writeBinding updates the record of hd to say what hd says (binding,
// retention, phase, expiry and the pod's address count, in one write: the
// status is not a subresource), if it is held as exp says or already held
// as hd says. It writes over the cached record and reads the record live
// when the cache is behind (a conflict, a record it does not show, or one
// not held as expected). A record already saying what hd says is not
// written again.
func (l *ledger) writeBinding(ctx context.Context, key string, hd holding, exp expect) error {
	target := heldBy(hd.recordKey(key), hd.phase)
	ipi, err := l.store.Get(ctx, hd.name)
	for attempt := 1; ; attempt++ {
		if err == nil {
			err = l.updateIf(ctx, ipi, hd, exp, target)
			if err == nil {
				return nil
			}
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !isStaleHolder(err) {
			return fmt.Errorf("update ipinstance %s of %s to %s: %w", hd.name, key, hd.phase, err)
		}
		if attempt == writeAttempts {
			return fmt.Errorf("update ipinstance %s of %s to %s after %d tries: %w", hd.name, key, hd.phase, attempt, err)
		}
		if ipi, err = l.store.GetLive(ctx, hd.name); err != nil {
			return fmt.Errorf("get ipinstance %s of %s: %w", hd.name, key, err)
		}
		if !exp.matches(ipi) && !bindsAs(ipi, target, hd) {
			return fmt.Errorf("update ipinstance %s of %s to %s: %w", hd.name, key, hd.phase, &heldElsewhere{record: ipi, want: exp})
		}
	}
}

// errStaleHolder: the record read (maybe from the cache) is not held as
// expected; the live record decides.
var errStaleHolder = errors.New("record read is not held as expected")

func isStaleHolder(err error) bool { return errors.Is(err, errStaleHolder) }

// updateIf writes hd into ipi if ipi is held as exp says or already as
// target says, unless it would change nothing.
func (l *ledger) updateIf(ctx context.Context, ipi *estuaryv1.IPInstance, hd holding, exp, target expect) error {
	if !exp.matches(ipi) && !bindsAs(ipi, target, hd) {
		return errStaleHolder
	}
	before := ipi.DeepCopy()
	applyHolding(ipi, hd)
	if equality.Semantic.DeepEqual(before, ipi) {
		return nil
	}
	return l.store.Update(ctx, ipi)
}

// bindsAs: ipi is held already as target says, and, when Bound, by hd's
// pod UID.
func bindsAs(ipi *estuaryv1.IPInstance, target expect, hd holding) bool {
	return target.matches(ipi) && (hd.phase != estuaryv1.IPInstanceBound || ipi.Spec.Binding.PodUID == hd.podUID)
}

// deleteRecord deletes the record of hd if it is held under key: the record
// is read (from the cache, live when the cache disagrees) and deleted with
// preconditions on its UID and resourceVersion. A record that is gone
// already is no error; one held elsewhere is a *heldElsewhere.
func (l *ledger) deleteRecord(ctx context.Context, key string, hd holding) error {
	exp := heldBy(key)
	ipi, err := l.store.Get(ctx, hd.name)
	for attempt := 1; ; attempt++ {
		if err == nil && exp.matches(ipi) {
			err = l.store.Delete(ctx, ipi)
			if err == nil || apierrors.IsNotFound(err) {
				return nil
			}
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ipinstance %s of %s: %w", hd.name, key, err)
		}
		if attempt == writeAttempts {
			return fmt.Errorf("delete ipinstance %s of %s after %d tries: %w", hd.name, key, attempt, err)
		}
		switch ipi, err = l.store.GetLive(ctx, hd.name); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("get ipinstance %s of %s: %w", hd.name, key, err)
		case !exp.matches(ipi):
			return fmt.Errorf("delete ipinstance %s of %s: %w", hd.name, key, &heldElsewhere{record: ipi, want: exp})
		}
	}
}

// countOf is the address count a record carries, or 0.
func countOf(ipi *estuaryv1.IPInstance) int {
	n, err := strconv.Atoi(ipi.Annotations[estuaryv1.AnnotationAddresses])
	if err != nil || n < 0 {
		return 0
	}
	return n
}
