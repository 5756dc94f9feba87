package podipam

// OpenKruise's Advanced StatefulSet (apps.kruise.io) is kept like a
// StatefulSet: its pods are named <set>-<ordinal>, take the ip-pool and
// mac-pool entry of their ordinal, keep their addresses by default, and
// release them when the set no longer has their ordinal or is deleted. Its
// ordinals are the first spec.replicas ones not listed in
// spec.reserveOrdinals (an ordinal, or a range "a-b"). It is read live as
// an unstructured object (v1beta1, else v1alpha1), so estuary needs neither
// OpenKruise's Go module nor its CRDs.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/workload"
)

// kruiseWantsOrdinal is setWantsOrdinal for an Advanced StatefulSet.
func (rt *retainer) kruiseWantsOrdinal(ctx context.Context, ns string, set *setRef) (bool, error) {
	u, err := rt.readKruiseSet(ctx, ns, set.name)
	if err != nil || u == nil {
		return false, err
	}
	if u.GetDeletionTimestamp() != nil && !slices.Contains(u.GetFinalizers(), metav1.FinalizerOrphanDependents) {
		return false, nil
	}
	annotations, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
	if !rt.templateKeeps(metav1.ObjectMeta{Annotations: annotations}) {
		return false, nil
	}
	replicas, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil {
		return false, fmt.Errorf("statefulset.apps.kruise.io %s/%s: spec.replicas: %w", ns, set.name, err)
	}
	if !found {
		replicas = 1
	}
	reserved, err := reserveOrdinals(u)
	if err != nil {
		return false, fmt.Errorf("statefulset.apps.kruise.io %s/%s: %w", ns, set.name, err)
	}
	return ordinalWanted(set.ordinal, replicas, reserved), nil
}

// readKruiseSet reads the Advanced StatefulSet ns/name live: nil when it,
// or its kind, does not exist.
func (rt *retainer) readKruiseSet(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	for _, version := range []string{"v1beta1", "v1alpha1"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(workload.GroupKruise + "/" + version)
		u.SetKind(workload.KindStatefulSet)
		switch err := rt.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); {
		case err == nil:
			return u, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case apimeta.IsNoMatchError(err):
			continue
		default:
			return nil, fmt.Errorf("get statefulset.apps.kruise.io %s/%s: %w", ns, name, err)
		}
	}
	return nil, nil
}

// ordinalRanges are reserved ordinals, as inclusive ranges.
type ordinalRanges [][2]int64

func (rs ordinalRanges) has(i int64) bool {
	return slices.ContainsFunc(rs, func(r [2]int64) bool { return r[0] <= i && i <= r[1] })
}

// reserveOrdinals reads spec.reserveOrdinals: ordinals, and ranges "a-b".
func reserveOrdinals(u *unstructured.Unstructured) (ordinalRanges, error) {
	list, _, err := unstructured.NestedSlice(u.Object, "spec", "reserveOrdinals")
	if err != nil {
		return nil, fmt.Errorf("spec.reserveOrdinals: %w", err)
	}
	var out ordinalRanges
	for _, v := range list {
		switch v := v.(type) {
		case int64:
			out = append(out, [2]int64{v, v})
		case float64:
			out = append(out, [2]int64{int64(v), int64(v)})
		case string:
			lo, hi, isRange := strings.Cut(v, "-")
			a, err := strconv.ParseInt(lo, 10, 32)
			b := a
			if err == nil && isRange {
				b, err = strconv.ParseInt(hi, 10, 32)
			}
			if err != nil || b < a {
				return nil, fmt.Errorf("spec.reserveOrdinals: %q is neither an ordinal nor a range a-b", v)
			}
			out = append(out, [2]int64{a, b})
		}
	}
	return out, nil
}

// ordinalWanted: ordinal is one of the first replicas ordinals not
// reserved.
func ordinalWanted(ordinal int32, replicas int64, reserved ordinalRanges) bool {
	if reserved.has(int64(ordinal)) {
		return false
	}
	below := int64(0)
	for i := int64(0); i < int64(ordinal) && below < replicas; i++ {
		if !reserved.has(i) {
			below++
		}
	}
	return below < replicas
}
