package ipamcheck

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Read takes a snapshot with r (a live reader: a cache may lag). Pods are
// listed before records, so a record whose pod is missing from the list was
// created after the pod list began (and is young) or is really left over.
func Read(ctx context.Context, r client.Reader, grace time.Duration) (Snapshot, error) {
	s := Snapshot{Grace: grace}
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return s, fmt.Errorf("list pods: %w", err)
	}
	s.Taken = time.Now()
	var records estuaryv1.IPInstanceList
	if err := r.List(ctx, &records); err != nil {
		return s, fmt.Errorf("list ipinstances: %w", err)
	}
	var subnets estuaryv1.SubnetList
	if err := r.List(ctx, &subnets); err != nil {
		return s, fmt.Errorf("list subnets: %w", err)
	}
	s.Pods, s.Records, s.Subnets = pods.Items, records.Items, subnets.Items
	return s, nil
}

// CheckTwice reads and checks twice, interval apart, and reports what both
// checks found (Stable).
func CheckTwice(ctx context.Context, r client.Reader, grace, interval time.Duration) (Report, error) {
	s, err := Read(ctx, r, grace)
	if err != nil {
		return Report{}, err
	}
	first := Check(s)
	if len(first.Findings) == 0 {
		return first, nil
	}
	select {
	case <-ctx.Done():
		return Report{}, ctx.Err()
	case <-time.After(interval):
	}
	if s, err = Read(ctx, r, grace); err != nil {
		return Report{}, err
	}
	return Stable(first, Check(s)), nil
}
