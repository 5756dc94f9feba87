package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// daemonChecks: the DaemonSet, then one line per node. A node the
// DaemonSet's nodeSelector selects must run a Ready daemon, however its
// affinity or taints were changed: a node without estuary starts no pod.
func daemonChecks(ctx context.Context, k client.Reader, ns string) ([]StatusCheck, error) {
	var dss appsv1.DaemonSetList
	if err := k.List(ctx, &dss, client.InNamespace(ns), client.MatchingLabels{nameLabel: "estuary-daemon"}); err != nil {
		return nil, fmt.Errorf("list the estuary-daemon DaemonSet in %s: %w", ns, err)
	}
	var ds *appsv1.DaemonSet
	b := newCheck("daemon", "DaemonSet "+ns+"/estuary-daemon")
	switch len(dss.Items) {
	case 0:
		b.problem("not found (no DaemonSet labelled %s=estuary-daemon)", nameLabel)
	default:
		ds = &dss.Items[0]
		b = newCheck("daemon", "DaemonSet "+ds.Namespace+"/"+ds.Name)
		b.fact("%d of %d scheduled pods ready, %d up to date", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, ds.Status.UpdatedNumberScheduled)
	}
	out := []StatusCheck{b.done()}
	pods, err := daemonPods(ctx, k, ns, ds)
	if err != nil {
		return nil, err
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := k.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	selector := labels.Everything()
	if ds != nil {
		selector = labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
	}
	slices.SortFunc(nodes.Items, func(a, b metav1.PartialObjectMetadata) int { return strings.Compare(a.Name, b.Name) })
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !selector.Matches(labels.Set(n.Labels)) {
			b := newCheck("node", n.Name)
			b.fact("not selected by the DaemonSet's nodeSelector %s: no daemon expected", selector)
			out = append(out, b.done())
			continue
		}
		out = append(out, nodeCheck(n, pods[n.Name]))
	}
	return out, nil
}

// daemonPods lists the DaemonSet's pods (by its selector, else the chart's
// label) by node.
func daemonPods(ctx context.Context, k client.Reader, ns string, ds *appsv1.DaemonSet) (map[string][]corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{nameLabel: "estuary-daemon"})
	if ds != nil && ds.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("DaemonSet %s/%s selector: %w", ds.Namespace, ds.Name, err)
		}
		sel = s
	}
	var list corev1.PodList
	if err := k.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list the estuary-daemon pods in %s: %w", ns, err)
	}
	out := map[string][]corev1.Pod{}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out, nil
}

// nodeCheck is a node's line: its daemon pod, what the daemon published
// about its conflist and fast path, and its BGP sessions.
func nodeCheck(n *metav1.PartialObjectMetadata, pods []corev1.Pod) StatusCheck {
	b := newCheck("node", n.Name)
	pod := bestDaemonPod(pods)
	switch {
	case pod == nil:
		b.problem("no estuary-daemon pod")
	case !statusPodReady(pod):
		b.problem("daemon pod %s not ready: %s", pod.Name, podTrouble(pod))
	default:
		b.fact("daemon %s ready", pod.Name)
	}
	if pod != nil {
		daemonStatusFacts(b, n.Annotations)
	}
	bgpFacts(b, n.Annotations[estuaryv1.AnnotationBGPPeers])
	return b.done()
}

// bestDaemonPod is the pod that speaks for the node: a Ready one, else one
// not being deleted, else any.
func bestDaemonPod(pods []corev1.Pod) *corev1.Pod {
	var best *corev1.Pod
	for i := range pods {
		p := &pods[i]
		switch {
		case statusPodReady(p):
			return p
		case best == nil || (best.DeletionTimestamp != nil && p.DeletionTimestamp == nil):
			best = p
		}
	}
	return best
}

func statusPodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podTrouble says why a pod is not ready: its phase, and a container's
// waiting or termination reason.
func podTrouble(p *corev1.Pod) string {
	why := []string{string(p.Status.Phase)}
	if p.DeletionTimestamp != nil {
		why = append(why, "being deleted")
	}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			why = append(why, fmt.Sprintf("container %s %s", c.Name, c.State.Waiting.Reason))
		case c.State.Terminated != nil:
			why = append(why, fmt.Sprintf("container %s terminated (%s)", c.Name, c.State.Terminated.Reason))
		case !c.Ready:
			why = append(why, fmt.Sprintf("container %s not ready", c.Name))
		}
		if c.RestartCount > 0 {
			why = append(why, fmt.Sprintf("%d restarts", c.RestartCount))
		}
	}
	return strings.Join(why, ", ")
}

// daemonStatusFacts adds what the daemon published in its daemon-status
// annotation; a stale data path (no data-path pass fully succeeded within
// the daemon's bound, docs/status.md) is a problem.
func daemonStatusFacts(b *checkBuilder, ann map[string]string) {
	v, ok := ann[estuaryv1.AnnotationDaemonStatus]
	if !ok {
		b.problem("no %s annotation: its daemon has not published what it set up", estuaryv1.AnnotationDaemonStatus)
		return
	}
	var st estuaryv1.NodeDaemonStatus
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		b.problem("annotation %s unreadable: %v", estuaryv1.AnnotationDaemonStatus, err)
		return
	}
	c := st.Conflist
	switch {
	case !c.Installed:
		b.problem("conflist %s not written: %s", c.Path, c.Error)
	case c.ShadowedBy != "":
		b.problem("conflist %s installed but the runtime reads %s, which sorts first", c.Path, c.ShadowedBy)
	default:
		b.fact("conflist installed")
	}
	switch st.FastPath.State {
	case estuaryv1.FastPathLoaded:
		b.fact("fast path loaded")
	case estuaryv1.FastPathOff:
		b.fact("fast path off")
	case estuaryv1.FastPathRefused:
		b.warn("fast path refused by the kernel: %s", st.FastPath.Reason)
	default:
		b.fact("fast path %q", st.FastPath.State)
	}
	policyFacts(b, st.Policy)
	uplinkFacts(b, st.Uplinks)
	if d := st.DataPath; d != nil {
		b.problem("data path stale: %s", d.Problem)
	}
}

// uplinkFacts adds the link the daemon chose per mode in one fact
// ("uplinks vlan bond0 (node annotation), bgp eth0, vxlan eth0"); a mode
// without one, or a refused annotation, is a problem.
func uplinkFacts(b *checkBuilder, ups []estuaryv1.NodeUplinkStatus) {
	var links []string
	for _, u := range ups {
		if u.Problem != "" {
			b.problem("%s uplink: %s", u.Mode, u.Problem)
		}
		switch {
		case u.Link == "":
		case u.Source == "annotation":
			links = append(links, u.Mode+" "+u.Link+" (node annotation)")
		default:
			links = append(links, u.Mode+" "+u.Link)
		}
	}
	if len(links) > 0 {
		b.fact("uplinks %s", strings.Join(links, ", "))
	}
}

// policyFacts adds what the daemon published about its policy: kube-proxy's
// mode, and a problem (kube-proxy's IPVS mode bypasses ingress policy).
func policyFacts(b *checkBuilder, p *estuaryv1.NodePolicyStatus) {
	switch {
	case p == nil:
	case p.Problem != "":
		b.problem("network policy: %s", p.Problem)
	case p.KubeProxyMode != "":
		b.fact("kube-proxy %s mode", p.KubeProxyMode)
	default:
		b.fact("kube-proxy mode unknown")
	}
}

// bgpFacts adds each BGP session the node's daemon published; one not
// Established is a problem.
func bgpFacts(b *checkBuilder, v string) {
	if v == "" {
		return
	}
	var nets map[string][]estuaryv1.NodeBGPPeer
	if err := json.Unmarshal([]byte(v), &nets); err != nil {
		b.problem("annotation %s unreadable: %v", estuaryv1.AnnotationBGPPeers, err)
		return
	}
	for _, net := range slices.Sorted(maps.Keys(nets)) {
		if len(nets[net]) == 0 {
			b.problem("BGP network %s: no peer", net)
		}
		for _, p := range nets[net] {
			if p.State == estuaryv1.BGPStateEstablished {
				b.fact("BGP %s peer %s Established", net, p.Address)
			} else {
				b.problem("BGP network %s peer %s (AS %d) %s", net, p.Address, p.ASN, p.State)
			}
		}
	}
}

// addressChecks: a line per Subnet (its use against threshold, its
// conditions) and per Network with conditions.
func addressChecks(ctx context.Context, k client.Reader, threshold float64) ([]StatusCheck, error) {
	var subnets estuaryv1.SubnetList
	if err := k.List(ctx, &subnets); err != nil {
		return nil, fmt.Errorf("list subnets: %w", err)
	}
	slices.SortFunc(subnets.Items, func(a, b estuaryv1.Subnet) int { return strings.Compare(a.Name, b.Name) })
	var out []StatusCheck
	for i := range subnets.Items {
		sn := &subnets.Items[i]
		b := newCheck("subnet", sn.Name)
		subnetUse(b, sn, threshold)
		conditionFacts(b, sn.Status.Conditions)
		out = append(out, b.done())
	}
	var networks estuaryv1.NetworkList
	if err := k.List(ctx, &networks); err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	slices.SortFunc(networks.Items, func(a, b estuaryv1.Network) int { return strings.Compare(a.Name, b.Name) })
	for i := range networks.Items {
		nw := &networks.Items[i]
		b := newCheck("network", nw.Name)
		b.fact("%s", nw.Spec.Type)
		if nw.Spec.Mode != "" {
			b.fact("mode %s", nw.Spec.Mode)
		}
		conditionFacts(b, nw.Status.Conditions)
		out = append(out, b.done())
	}
	return out, nil
}

// subnetUse judges a subnet's addresses in use (total - available) against
// threshold percent.
func subnetUse(b *checkBuilder, sn *estuaryv1.Subnet, threshold float64) {
	total, okT := new(big.Int).SetString(sn.Status.Total, 10)
	avail, okA := new(big.Int).SetString(sn.Status.Available, 10)
	if !okT || !okA || total.Sign() == 0 {
		b.fact("%s, no usage counted yet", sn.Spec.Range.CIDR)
		return
	}
	inUse := new(big.Int).Sub(total, avail)
	pct, _ := new(big.Rat).SetFrac(new(big.Int).Mul(inUse, big.NewInt(100)), total).Float64()
	use := fmt.Sprintf("%s of %s addresses in use (%.1f%%), %s available", inUse, total, pct, avail)
	switch {
	case avail.Sign() == 0:
		b.problem("exhausted: %s", use)
	case pct >= threshold:
		b.problem("near exhaustion: %s, at or above --subnet-threshold %g%%", use, threshold)
	default:
		b.fact("%s: %s", sn.Spec.Range.CIDR, use)
	}
}

// judgedConditions are the conditions whose False is a problem.
var judgedConditions = []string{estuaryv1.ConditionBGPPeersEstablished, "Ready"}

func conditionFacts(b *checkBuilder, conds []metav1.Condition) {
	for _, t := range judgedConditions {
		c := meta.FindStatusCondition(conds, t)
		switch {
		case c == nil:
		case c.Status == metav1.ConditionFalse:
			b.problem("%s False (%s): %s", c.Type, c.Reason, c.Message)
		default:
			b.fact("%s %s", c.Type, c.Status)
		}
	}
}
