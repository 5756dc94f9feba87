package objtest

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// ClusterNamespace is the namespace of Cluster's pods.
const ClusterNamespace = "bench"

// Cluster is a cluster's worth of the objects a node's daemon caches, as
// the scale runs create them: Nodes node-0… publishing tunnel endpoints,
// and pods spread over them round-robin, each with its Bound IPInstance in
// the overlay (10.64.0.0/10), and Reserved addresses of that overlay held
// for no pod (fixed IPs reserved or retained: records with no node).
type Cluster struct {
	Nodes, Pods, Reserved int
}

// NodeAt is the i-th node.
func (c Cluster) NodeAt(i int) corev1.Node {
	n := Node(fmt.Sprintf("node-%d", i), fmt.Sprintf("10.90.%d.%d", i/250, 1+i%250),
		fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256), fmt.Sprintf("10.90.%d.%d", i/250, 1+i%250))
	n.Labels = map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux"}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 320368}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", Message: "kubelet is posting ready status"}}
	return n
}

// PodAt is the i-th pod, on node i % Nodes.
func (c Cluster) PodAt(i int) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ClusterNamespace, Name: fmt.Sprintf("pod-%d", i),
			Labels:      map[string]string{"app": fmt.Sprintf("app-%d", i/50), "pod-template-hash": "5d8f7c9b6"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%c.Nodes), Containers: []corev1.Container{{
			Name: "app", Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}}},
	}
}

// addressAt is the i-th address of the overlay.
func addressAt(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 64+i/65000, (i/250)%256, 1+i%250)
}

// ReservationAt is the i-th reserved record: an address after the pods',
// held for a workload with no pod, so on no node.
func (c Cluster) ReservationAt(i int) estuaryv1.IPInstance {
	ip := addressAt(c.Pods + i)
	return estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: map[string]string{
			estuaryv1.LabelNamespace: ClusterNamespace, estuaryv1.LabelSubnet: "overlay-v4"}},
		Spec: estuaryv1.IPInstanceSpec{Network: "overlay", Subnet: "overlay-v4", Reserved: true,
			Address: estuaryv1.InstanceAddress{IP: ip + "/10", Version: 4},
			Binding: estuaryv1.Binding{Namespace: ClusterNamespace,
				Owner: estuaryv1.OwnerReference{Kind: "StatefulSet", Name: fmt.Sprintf("set-%d", i/10)}}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceReserved},
	}
}

// InstanceAt is the i-th pod's record.
func (c Cluster) InstanceAt(i int) estuaryv1.IPInstance {
	ip := addressAt(i)
	pod, node := fmt.Sprintf("pod-%d", i), fmt.Sprintf("node-%d", i%c.Nodes)
	uid := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
	ipi := Instance(ip+"/10", node, estuaryv1.IPInstanceBound)
	ipi.Name = ip
	ipi.Labels[estuaryv1.LabelNamespace], ipi.Labels[estuaryv1.LabelPod] = ClusterNamespace, pod
	ipi.Labels[estuaryv1.LabelSubnet] = "overlay-v4"
	ipi.Annotations = map[string]string{estuaryv1.AnnotationAddresses: "1"}
	ipi.Spec.Network, ipi.Spec.Subnet, ipi.Spec.Address.Version = "overlay", "overlay-v4", 4
	ipi.Spec.Binding = estuaryv1.Binding{Namespace: ClusterNamespace, PodName: pod, PodUID: uid, NodeName: node,
		Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: pod, UID: uid}}
	ipi.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: types.UID(uid)}}
	return ipi
}

// Create creates the cluster through k8s with workers requests in flight:
// the namespace, the nodes, and, when pods is set, the pods; the records
// and the reservations always.
func (c Cluster) Create(ctx context.Context, k8s client.Client, pods bool, workers int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ClusterNamespace}}
	if err := k8s.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", ClusterNamespace, err)
	}
	if err := parallel(ctx, c.Nodes, workers, func(i int) client.Object { n := c.NodeAt(i); return &n }, k8s); err != nil {
		return err
	}
	if pods {
		if err := parallel(ctx, c.Pods, workers, func(i int) client.Object { p := c.PodAt(i); return &p }, k8s); err != nil {
			return err
		}
	}
	if err := parallel(ctx, c.Pods, workers, func(i int) client.Object { r := c.InstanceAt(i); return &r }, k8s); err != nil {
		return err
	}
	return parallel(ctx, c.Reserved, workers, func(i int) client.Object { r := c.ReservationAt(i); return &r }, k8s)
}

// parallel creates obj(0)…obj(n-1) with workers requests in flight.
func parallel(ctx context.Context, n, workers int, obj func(int) client.Object, k8s client.Client) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				o := obj(i)
				if err := k8s.Create(ctx, o); err != nil {
					errs <- fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
					return
				}
			}
		})
	}
	var err error
	for i := 0; i < n && err == nil; i++ {
		select {
		case next <- i:
		case err = <-errs:
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs
}

// LiveHeap is the heap in use after a collection.
func LiveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
