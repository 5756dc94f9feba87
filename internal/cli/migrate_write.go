package cli

// Writing a migration: create if absent, never update. An object of the
// same name that exists already is compared with what migrate would write:
// equal, it is reported unchanged; different, it is reported with the
// fields that differ and left as it is (the operator decides), and the
// command fails. An address record that exists for the same workload is
// the manager's now (it may have bound it to a new pod) and is left as it
// is without failing; one recorded for another workload is a conflict.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/migrate"
)

// migrateWriter writes one migration and counts what became of each object.
type migrateWriter struct {
	k   client.Client
	out io.Writer
	// created, unchanged, kept (a record the manager has taken over) and
	// failed (not written, or existing and different) objects.
	created, unchanged, kept, failed int
}

// writeAll writes res in order (Secrets, Networks, Subnets, IPInstances)
// and returns how many objects failed.
func (w *migrateWriter) writeAll(ctx context.Context, res *migrate.Result) int {
	for _, s := range res.Secrets {
		w.write(ctx, "secret "+s.Namespace+"/"+s.Name, s, &corev1.Secret{}, secretDiff)
	}
	for _, n := range res.Networks {
		w.write(ctx, "network "+n.Name, n, &estuaryv1.Network{}, func(want, have client.Object) []string {
			return specDiff(want.(*estuaryv1.Network).Spec, have.(*estuaryv1.Network).Spec)
		})
	}
	for _, s := range res.Subnets {
		w.write(ctx, "subnet "+s.Name, s, &estuaryv1.Subnet{}, func(want, have client.Object) []string {
			return specDiff(want.(*estuaryv1.Subnet).Spec, have.(*estuaryv1.Subnet).Spec)
		})
	}
	for _, ipi := range res.IPInstances {
		w.writeRecord(ctx, ipi)
	}
	return w.failed
}

func (w *migrateWriter) line(format string, args ...any) {
	_, _ = fmt.Fprintf(w.out, format+"\n", args...)
}

// write creates want unless an object of its name exists; then diff says
// how the existing one (read into have) differs.
func (w *migrateWriter) write(ctx context.Context, what string, want, have client.Object, diff func(want, have client.Object) []string) {
	err := w.k.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := w.k.Create(ctx, want); err != nil {
			w.failed++
			w.line("failed  %s: %v", what, err)
			return
		}
		w.created++
		w.line("created %s", what)
	case err != nil:
		w.failed++
		w.line("failed  %s: read the existing one: %v", what, err)
	default:
		if d := diff(want, have); len(d) > 0 {
			w.failed++
			w.line("differs %s exists and differs from what migrate would write; left as it is: %s", what, strings.Join(d, "; "))
			return
		}
		w.unchanged++
		w.line("exists  %s, as migrate would write it", what)
	}
}

// writeRecord creates an address record, or reports the one that exists.
func (w *migrateWriter) writeRecord(ctx context.Context, want *estuaryv1.IPInstance) {
	what := "ipinstance " + want.Name
	have := &estuaryv1.IPInstance{}
	err := w.k.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := w.k.Create(ctx, want); err != nil {
			w.failed++
			w.line("failed  %s (%s): %v", what, want.Spec.Address.IP, err)
			return
		}
		w.created++
		w.line("created %s (%s)", what, migrateHolder(want))
	case err != nil:
		w.failed++
		w.line("failed  %s: read the existing one: %v", what, err)
	case sameRecord(want, have):
		w.unchanged++
		w.line("exists  %s, as migrate would write it", what)
	case sameHolder(want, have):
		w.kept++
		w.line("kept    %s: already recorded for the same workload (%s); left as it is", what, migrateHolder(have))
	default:
		w.failed++
		w.line("differs %s: already recorded (%s), not as migrate would write it (%s); left as it is", what, migrateHolder(have), migrateHolder(want))
	}
}

// migrateHolder says who holds a record: its address, phase, owner and pod.
func migrateHolder(ipi *estuaryv1.IPInstance) string {
	s := fmt.Sprintf("%s %s for %s", ipi.Spec.Address.IP, ipi.Status.Phase, ownerName(ipi))
	if p := ipi.Spec.Binding.PodName; p != "" {
		s += ", pod " + p
	}
	return s
}

// sameRecord: have says everything migrate would write.
func sameRecord(want, have *estuaryv1.IPInstance) bool {
	return equality.Semantic.DeepEqual(want.Spec, have.Spec) && want.Status.Phase == have.Status.Phase
}

// sameHolder: have keeps the address in the same namespace for the same
// workload (or StatefulSet ordinal).
func sameHolder(want, have *estuaryv1.IPInstance) bool {
	a, b := want.Spec.Binding, have.Spec.Binding
	return a.Namespace == b.Namespace && a.Owner.Kind == b.Owner.Kind && a.Owner.Name == b.Owner.Name &&
		equality.Semantic.DeepEqual(a.StatefulOrdinal, b.StatefulOrdinal) && want.Spec.Subnet == have.Spec.Subnet
}

// secretDiff compares the data (never printed) and type of two Secrets.
func secretDiff(want, have client.Object) []string {
	a, b := want.(*corev1.Secret), have.(*corev1.Secret)
	var d []string
	if a.Type != b.Type {
		d = append(d, fmt.Sprintf("type is %s, migrate would write %s", b.Type, a.Type))
	}
	keys := slices.Sorted(maps.Keys(a.Data))
	for _, k := range slices.Sorted(maps.Keys(b.Data)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if !bytes.Equal(a.Data[k], b.Data[k]) {
			d = append(d, fmt.Sprintf("data[%s] differs", k))
		}
	}
	return d
}

// specDiff lists the spec fields in which have differs from want, with
// both values.
func specDiff(want, have any) []string {
	a, errA := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
	b, errB := runtime.DefaultUnstructuredConverter.ToUnstructured(&have)
	if errA != nil || errB != nil {
		if equality.Semantic.DeepEqual(want, have) {
			return nil
		}
		return []string{"spec differs"}
	}
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var d []string
	for _, k := range keys {
		if !equality.Semantic.DeepEqual(a[k], b[k]) {
			d = append(d, fmt.Sprintf("spec.%s is %s, migrate would write %s", k, compactJSON(b[k]), compactJSON(a[k])))
		}
	}
	return d
}

func compactJSON(v any) string {
	if v == nil {
		return "unset"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func (w *migrateWriter) summary() string {
	return fmt.Sprintf("%d created, %d already as migrate would write them, %d address records already kept for their workload, %d not written or differing",
		w.created, w.unchanged, w.kept, w.failed)
}
