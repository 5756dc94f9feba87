package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// loadConfig sizes the load.
type loadConfig struct {
	Namespaces, Pods, Policies, Workers int
	Node, CIDR                          string
}

// Namespace names the load's n-th namespace.
func Namespace(n int) string { return fmt.Sprintf("pb-%03d", n) }

// The scheme, the one of policytranslate's BenchmarkPolicy: namespace n has
// team=t<n%10>; its pod i has app=a<i%10>, role=r<i%5> and a named port
// http (8000 + i%3). Policy np<k> selects app=a<k> (so a namespace's ten
// policies select all its pods), admits role=r<k%5> of the ten namespaces of
// team t<k> (200 peers) on 443 and http, and allows egress to its own
// namespace on http; every third one also admits an ipBlock (with an
// except) on a port range.

func peerPod(ns string, i int, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%02d", i), Namespace: ns, Labels: map[string]string{
			"app": fmt.Sprintf("a%d", i%10), "role": fmt.Sprintf("r%d", i%5), PeerLabel: "sim", WebhookOptOut: "disabled"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "pause", Image: "estuary-lab.local/pause:lab",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(8000 + i%3), Protocol: corev1.ProtocolTCP}}}},
		},
	}
}

func netPolicy(ns string, n, k int, cidr netip.Prefix) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := func(p intstr.IntOrString) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p}
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("np%d", k), Namespace: ns, Labels: map[string]string{LoadLabel: "true"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *sel("app", fmt.Sprintf("a%d", k)),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: sel("team", fmt.Sprintf("t%d", k)), PodSelector: sel("role", fmt.Sprintf("r%d", k%5))}},
				Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromInt32(443)), port(intstr.FromString("http"))},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{port(intstr.FromString("http"))},
			}},
		},
	}
	if k%3 == 0 {
		// A /18 of the peers' range less one /24 of it, chosen by namespace.
		base := cidr.Addr().As4()
		except := netip.AddrFrom4([4]byte{base[0], base[1], byte(n % 64), 0})
		p := port(intstr.FromInt32(9000))
		end := int32(9100)
		p.EndPort = &end
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
				CIDR: netip.PrefixFrom(cidr.Addr(), 18).String(), Except: []string{netip.PrefixFrom(except, 24).String()}}}},
			Ports: []networkingv1.NetworkPolicyPort{p},
		})
	}
	return np
}

// peerAddr is the address of peer g (0-based over all namespaces): the
// range's (g+1)-th address.
func peerAddr(cidr netip.Prefix, g int) (netip.Addr, error) {
	b := cidr.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(g) + 1
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	if g < 0 || !cidr.Contains(a) {
		return netip.Addr{}, fmt.Errorf("peer %d does not fit in %s", g, cidr)
	}
	return a, nil
}

// load creates the Node, the namespaces, the peers (and their status) and
// the policies, and prints how long each took.
func load(ctx context.Context, cs kubernetes.Interface, cfg loadConfig) error {
	cidr, err := netip.ParsePrefix(cfg.CIDR)
	if err != nil || !cidr.Addr().Is4() || cidr.Bits() > 16 {
		return fmt.Errorf("--cidr %q: want an IPv4 prefix of /16 or wider", cfg.CIDR)
	}
	if cfg.Policies > 10 {
		return fmt.Errorf("--policies %d: at most 10 (one per app label)", cfg.Policies)
	}
	start := time.Now()
	if err := ensureNode(ctx, cs, cfg.Node); err != nil {
		return err
	}
	for n := range cfg.Namespaces {
		if err := ensureNamespace(ctx, cs, Namespace(n), n); err != nil {
			return err
		}
	}
	t := time.Now()
	err = parallel(ctx, cfg.Workers, cfg.Namespaces*cfg.Pods, func(ctx context.Context, g int) error {
		ns, i := Namespace(g/cfg.Pods), g%cfg.Pods
		addr, err := peerAddr(cidr, g)
		if err != nil {
			return err
		}
		return createPeer(ctx, cs, peerPod(ns, i, cfg.Node), addr)
	})
	if err != nil {
		return err
	}
	fmt.Printf("peers\t%d\t%.1f s\n", cfg.Namespaces*cfg.Pods, time.Since(t).Seconds())
	t = time.Now()
	err = parallel(ctx, cfg.Workers, cfg.Namespaces*cfg.Policies, func(ctx context.Context, j int) error {
		n, k := j/cfg.Policies, j%cfg.Policies
		np := netPolicy(Namespace(n), n, k, cidr)
		err := retry(ctx, func() error {
			_, err := cs.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{})
			return ignoreExists(err)
		})
		if err != nil {
			return fmt.Errorf("create networkpolicy %s/%s: %w", np.Namespace, np.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("policies\t%d\t%.1f s\n", cfg.Namespaces*cfg.Policies, time.Since(t).Seconds())
	fmt.Printf("total\t\t%.1f s\n", time.Since(start).Seconds())
	return nil
}

func ensureNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LoadLabel: "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: LoadLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}
	err := retry(ctx, func() error {
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return ignoreExists(err)
	})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return nil
}

// ensureNamespace creates namespace n, or labels it when it exists.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string, n int) error {
	labels := map[string]string{LoadLabel: "true", "team": fmt.Sprintf("t%d", n%10)}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	err := retry(ctx, func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		return err
	})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return fmt.Errorf("label namespace %s: %w", name, err)
	}
	err = retry(ctx, func() error {
		_, err := cs.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("label namespace %s: %w", name, err)
	}
	return nil
}

// createPeer creates pod and writes its status as a kubelet would: Running,
// with addr.
func createPeer(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, addr netip.Addr) error {
	pods := cs.CoreV1().Pods(pod.Namespace)
	err := retry(ctx, func() error {
		_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		return ignoreExists(err)
	})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	status, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase": corev1.PodRunning, "podIP": addr.String(), "podIPs": []map[string]string{{"ip": addr.String()}}}})
	if err != nil {
		return fmt.Errorf("status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	err = retry(ctx, func() error {
		_, err := pods.Patch(ctx, pod.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status")
		return err
	})
	if err != nil {
		return fmt.Errorf("write status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// retry calls fn until it succeeds, fails for good, or has failed 5 times:
// the API server of a loaded lab now and then drops a connection or
// answers 429 or 5xx, and a write lost that way is written again.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range 5 {
		if err = fn(); err == nil || !transient(err) {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt+1) * time.Second):
		case <-ctx.Done():
			return err
		}
	}
	return err
}

// transient: the API server did not decide on the request (no answer, 429,
// 5xx), so it may be sent again.
func transient(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	return true
}

// ignoreExists: an object created by an earlier attempt, or an earlier
// load, is as good as a new one.
func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// parallel runs fn(0) ... fn(n-1) on workers goroutines and returns the
// first error (the rest are cancelled).
func parallel(ctx context.Context, workers, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				if err := fn(ctx, j); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for j := range n {
		select {
		case jobs <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return context.Cause(ctx)
}

// unload deletes the peers (at once: no kubelet would ever confirm a
// graceful deletion), the policies, the namespaces and the Node, and, with
// wait, waits for the namespaces to be gone.
func unload(ctx context.Context, cs kubernetes.Interface, node string, wait bool) error {
	sel := metav1.ListOptions{LabelSelector: LoadLabel}
	nss, err := cs.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		return fmt.Errorf("list the load's namespaces: %w", err)
	}
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	for _, ns := range nss.Items {
		if err := cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, now, metav1.ListOptions{LabelSelector: PeerLabel}); err != nil {
			return fmt.Errorf("delete the peers of %s: %w", ns.Name, err)
		}
		if err := cs.NetworkingV1().NetworkPolicies(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			return fmt.Errorf("delete the policies of %s: %w", ns.Name, err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete namespace %s: %w", ns.Name, err)
		}
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", node, err)
	}
	if !wait {
		return nil
	}
	err = kwait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		left, err := cs.CoreV1().Namespaces().List(ctx, sel)
		if err != nil {
			return false, fmt.Errorf("list the load's namespaces: %w", err)
		}
		return len(left.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the load's namespaces are not gone: %w", err)
	}
	return nil
}
