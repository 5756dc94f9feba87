package scale

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
)

// What marks a fake node: kwok manages the nodes carrying kwokAnnotation;
// the taint keeps every pod that does not ask for a fake node off them,
// and fakeLabel is what the scale pods select and estuary's own pods avoid.
const (
	kwokAnnotation = "kwok.x-k8s.io/node"
	kwokValue      = "fake"
	fakeLabel      = "type"
	fakeValue      = "kwok"
	// domainLabel puts a fake node in underlay domain a or b.
	domainLabel = "scale.estuary.io/domain"
	// maxPodsPerNode is each fake node's pod capacity, a kubelet's default.
	maxPodsPerNode = 110
)

// Address plans of the fake nodes, clear of the lab's ranges (10.77-10.79)
// and of the scale networks' subnets.
var (
	// fakeNodeIPs holds each fake node's InternalIP, also its VTEP.
	fakeNodeIPs = netip.MustParsePrefix("10.90.0.0/16")
	// fakePodCIDRs holds each fake node's podCIDR (a /24), from which kwok
	// reports its pods' status addresses; estuary does not use them.
	fakePodCIDRs = netip.MustParsePrefix("100.64.0.0/10")
)

// fakeNodeName is the name of fake node i.
func fakeNodeName(i int) string { return fmt.Sprintf("kwok-node-%04d", i) }

// fakeNode is fake node i as a real estuary node looks once its daemon has
// published its VTEP: InternalIP, vtep-ip (the same address) and vtep-mac
// (overlay.StableMAC of its name, as the daemon derives it), a domain
// label, the kwok taint, and room for maxPodsPerNode pods.
func fakeNode(i int) (*corev1.Node, error) {
	ip, err := nthAddr(fakeNodeIPs, i+1)
	if err != nil {
		return nil, fmt.Errorf("fake node %d: %w", i, err)
	}
	cidr, err := nthSlash24(fakePodCIDRs, i)
	if err != nil {
		return nil, fmt.Errorf("fake node %d: %w", i, err)
	}
	name := fakeNodeName(i)
	domain := "a"
	if i%2 == 1 {
		domain = "b"
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(maxPodsPerNode, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				fakeLabel: fakeValue, domainLabel: domain,
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			},
			Annotations: map[string]string{
				kwokAnnotation:              kwokValue,
				estuaryv1.AnnotationVTEPIP:  ip.String(),
				estuaryv1.AnnotationVTEPMAC: overlay.StableMAC(name).String(),
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:  cidr.String(),
			PodCIDRs: []string{cidr.String()},
			Taints:   []corev1.Taint{{Key: kwokAnnotation, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Allocatable: res,
			Capacity:    res,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip.String()},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}, nil
}

// nthAddr is the n-th address after p's first.
func nthAddr(p netip.Prefix, n int) (netip.Addr, error) {
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(n) //nolint:gosec // G115: n is a node index, far below 2^32
	out := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	if !p.Contains(out) {
		return netip.Addr{}, fmt.Errorf("address %d is past %s", n, p)
	}
	return out, nil
}

// nthSlash24 is the n-th /24 of p.
func nthSlash24(p netip.Prefix, n int) (netip.Prefix, error) {
	a, err := nthAddr(p, n*256)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, 24), nil
}

// createNodes creates fake nodes from..to-1 with workers in parallel.
// A node that exists is left as it is.
func createNodes(ctx context.Context, c client.Client, from, to, workers int) error {
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				n, err := fakeNode(i)
				if err == nil {
					err = c.Create(ctx, n)
				}
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- fmt.Errorf("create node %s: %w", fakeNodeName(i), err)
					return
				}
			}
		})
	}
	var err error
loop:
	for i := from; i < to; i++ {
		select {
		case jobs <- i:
		case err = <-errs:
			break loop
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// readyFakeNodes counts the fake nodes whose Ready condition is True.
func readyFakeNodes(ctx context.Context, c client.Client) (int, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{fakeLabel: fakeValue}); err != nil {
		return 0, fmt.Errorf("list fake nodes: %w", err)
	}
	n := 0
	for _, nd := range nodes.Items {
		for _, cond := range nd.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}
