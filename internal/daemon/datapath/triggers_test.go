package datapath

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
)

func TestChangesDataPath(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"},
			Annotations: map[string]string{estuaryv1.AnnotationVTEPIP: "10.0.0.1"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}},
	}
	subnet := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 1}}
	network := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "net", Generation: 3}}
	ipi := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "10-0-0-5", Labels: map[string]string{estuaryv1.LabelNode: "n1"}},
		Spec:       estuaryv1.IPInstanceSpec{Address: estuaryv1.InstanceAddress{IP: "10.0.0.5/24"}},
		Status:     estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound},
	}
	rec := remote.FromInstance(ipi)
	for _, c := range []struct {
		name string
		old  any
		edit func() any
		want bool
	}{
		{"node heartbeat", node, func() any {
			n := node.DeepCopy()
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, LastHeartbeatTime: metav1.Now()}}
			n.ResourceVersion = "9"
			return n
		}, false},
		{"node label", node, func() any { n := node.DeepCopy(); n.Labels["zone"] = "b"; return n }, true},
		{"node annotation", node, func() any {
			n := node.DeepCopy()
			n.Annotations[estuaryv1.AnnotationVTEPMAC] = "aa:bb:cc:dd:ee:ff"
			return n
		}, true},
		{"node address", node, func() any { n := node.DeepCopy(); n.Status.Addresses[0].Address = "10.0.0.2"; return n }, true},
		{"subnet status", subnet, func() any {
			s := subnet.DeepCopy()
			s.Status.Used = 7
			return s
		}, false},
		{"subnet spec", subnet, func() any { s := subnet.DeepCopy(); s.Generation = 2; return s }, true},
		{"subnet deleted", subnet, func() any { s := subnet.DeepCopy(); now := metav1.Now(); s.DeletionTimestamp = &now; return s }, true},
		{"network status", network, func() any { n := network.DeepCopy(); n.ResourceVersion = "5"; return n }, false},
		{"network label", network, func() any { n := network.DeepCopy(); n.Labels = map[string]string{"a": "b"}; return n }, true},
		{"ipinstance retention", ipi, func() any {
			i := ipi.DeepCopy()
			i.Spec.Retention = &estuaryv1.Retention{TTL: &metav1.Duration{}}
			return i
		}, false},
		{"ipinstance kept", ipi, func() any { i := ipi.DeepCopy(); i.Status.Phase = estuaryv1.IPInstanceRetained; return i }, true},
		{"ipinstance moved", ipi, func() any { i := ipi.DeepCopy(); i.Labels[estuaryv1.LabelNode] = "n2"; return i }, true},
		{"ipinstance address", ipi, func() any { i := ipi.DeepCopy(); i.Spec.Address.IP = "10.0.0.6/24"; return i }, true},
		{"record version", rec, func() any { r := *rec; r.ResourceVersion = "8"; return &r }, false},
		{"record kept", rec, func() any { r := *rec; r.Status.Phase = estuaryv1.IPInstanceRetained; return &r }, true},
		{"record moved", rec, func() any {
			r := *rec
			r.Labels = map[string]string{estuaryv1.LabelNode: "n2"}
			return &r
		}, true},
		{"record address", rec, func() any { r := *rec; r.Spec.Address.IP = "10.0.0.6/24"; return &r }, true},
		{"type changed", node, func() any { return subnet }, true},
		{"other type", &corev1.Pod{}, func() any { return &corev1.Pod{} }, true},
	} {
		if got := changesDataPath(c.old, c.edit()); got != c.want {
			t.Errorf("%s: changesDataPath = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestChangesPolicy(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "a"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"team": "x"}}}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np", Generation: 1}}
	for _, c := range []struct {
		name    string
		old     any
		updated any
		want    bool
	}{
		{"pod condition", pod, func() any {
			p := pod.DeepCopy()
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			return p
		}(), false},
		{"pod label", pod, func() any { p := pod.DeepCopy(); p.Labels["app"] = "b"; return p }(), true},
		{"pod address", pod, func() any {
			p := pod.DeepCopy()
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::5"})
			return p
		}(), true},
		{"pod finished", pod, func() any { p := pod.DeepCopy(); p.Status.Phase = corev1.PodSucceeded; return p }(), true},
		{"namespace annotation", ns, func() any {
			n := ns.DeepCopy()
			n.Annotations = map[string]string{"a": "b"}
			return n
		}(), false},
		{"namespace label", ns, func() any { n := ns.DeepCopy(); n.Labels["team"] = "y"; return n }(), true},
		{"policy resync", np, np.DeepCopy(), false},
		{"policy spec", np, func() any { p := np.DeepCopy(); p.Generation = 2; return p }(), true},
		{"type change", pod, ns, true},
	} {
		if got := changesPolicy(c.old, c.updated); got != c.want {
			t.Errorf("%s: changesPolicy = %v, want %v", c.name, got, c.want)
		}
	}
}
