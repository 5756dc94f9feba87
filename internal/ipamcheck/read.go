package ipamcheck

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// ReadNodes takes a snapshot with r (a live reader: a cache may lag) and
// then, when nodes is not nil, reads the daemon endpoints of every node a pod
// is scheduled to. Pods are listed before records, so a record whose pod is
// missing from the list was created after the pod list began (and is young)
// or is really left over. The nodes are read last: a pod listed running was
// plumbed before the list, and a record listed was made before its address
// was plumbed.
func ReadNodes(ctx context.Context, r client.Reader, nodes NodeEndpoints, grace time.Duration) (Snapshot, error) {
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
	if nodes != nil {
		s.Nodes = readNodes(ctx, nodes, s)
	}
	return s, nil
}

// CheckTwice reads and checks twice, interval apart, and reports what both
// checks found (Stable). It does not read the nodes.
func CheckTwice(ctx context.Context, r client.Reader, grace, interval time.Duration) (Report, error) {
	return CheckTwiceNodes(ctx, r, nil, grace, interval)
}

// CheckTwiceNodes is CheckTwice with the node pass when nodes is not nil.
func CheckTwiceNodes(ctx context.Context, r client.Reader, nodes NodeEndpoints, grace, interval time.Duration) (Report, error) {
	s, err := ReadNodes(ctx, r, nodes, grace)
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
	if s, err = ReadNodes(ctx, r, nodes, grace); err != nil {
		return Report{}, err
	}
	return Stable(first, Check(s)), nil
}
