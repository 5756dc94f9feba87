package policytranslate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

type podKey struct{ ns, name string }

// containerPort is a named container port of a pod.
type containerPort struct {
	name  string
	proto policy.Protocol
	num   uint16
}

type podInfo struct {
	key         podKey
	labels      labels.Set
	addrs       []netip.Addr
	ports       []containerPort
	hostNetwork bool
	// peer: the pod may be selected (pod network, not finished).
	peer bool
}

type nodeInfo struct {
	labels labels.Set
	addrs  []netip.Addr
}

// index is the cluster's objects as the translation looks them up, with
// the selections it has made so far.
type index struct {
	pods     map[podKey]*podInfo
	byNS     map[string][]*podInfo // selectable pods by namespace, by name
	nsLabels map[string]labels.Set
	nsNames  []string // every namespace with an object or a pod, sorted
	nodes    []nodeInfo
	nsCache  map[string][]string
	podCache map[string][]*podInfo
	// errs is what the translation reports: ObjectErrors (objErrs, by
	// object) and other errors, in the order met.
	errs    []error
	objErrs map[objRef]*ObjectError
}

func newIndex(in PolicyInput) *index {
	ix := &index{pods: map[podKey]*podInfo{}, byNS: map[string][]*podInfo{}, nsLabels: map[string]labels.Set{},
		nsCache: map[string][]string{}, podCache: map[string][]*podInfo{}, objErrs: map[objRef]*ObjectError{}}
	for _, ns := range in.Namespaces {
		ix.nsLabels[ns.Name] = ns.Labels
	}
	for i := range in.Pods {
		p := ix.podInfo(&in.Pods[i])
		ix.pods[p.key] = p
		if _, ok := ix.nsLabels[p.key.ns]; !ok {
			ix.nsLabels[p.key.ns] = labels.Set{}
		}
	}
	for _, e := range in.Endpoints {
		if p := ix.pods[podKey{e.Namespace, e.Name}]; p != nil {
			for _, a := range e.Addrs {
				if a = a.Unmap(); a.IsValid() && !slices.Contains(p.addrs, a) {
					p.addrs = append(p.addrs, a)
				}
			}
		}
	}
	for _, p := range ix.pods {
		if p.peer {
			ix.byNS[p.key.ns] = append(ix.byNS[p.key.ns], p)
		}
	}
	for ns, ps := range ix.byNS {
		slices.SortFunc(ps, func(a, b *podInfo) int { return strings.Compare(a.key.name, b.key.name) })
		ix.byNS[ns] = ps
	}
	for ns := range ix.nsLabels {
		ix.nsNames = append(ix.nsNames, ns)
	}
	slices.Sort(ix.nsNames)
	for _, n := range in.Nodes {
		ni := nodeInfo{labels: n.Labels}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				ni.addrs = append(ni.addrs, ip.Unmap())
			}
		}
		ix.nodes = append(ix.nodes, ni)
	}
	return ix
}

func (ix *index) podInfo(pod *corev1.Pod) *podInfo {
	p := &podInfo{key: podKey{pod.Namespace, pod.Name}, labels: pod.Labels, hostNetwork: pod.Spec.HostNetwork}
	p.peer = !pod.Spec.HostNetwork && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
	for _, ip := range pod.Status.PodIPs {
		a, err := netip.ParseAddr(ip.IP)
		if err != nil {
			ix.errorf("pod %s/%s: status.podIPs: %w", pod.Namespace, pod.Name, err)
			continue
		}
		if a = a.Unmap(); !slices.Contains(p.addrs, a) {
			p.addrs = append(p.addrs, a)
		}
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == always { // sidecars serve ports
			ix.addContainerPorts(p, c.Ports)
		}
	}
	for _, c := range pod.Spec.Containers {
		ix.addContainerPorts(p, c.Ports)
	}
	return p
}

func (ix *index) addContainerPorts(p *podInfo, ports []corev1.ContainerPort) {
	for _, cp := range ports {
		if cp.Name == "" {
			continue
		}
		proto, err := protocol(cp.Protocol)
		if err != nil || cp.ContainerPort < 1 || cp.ContainerPort > 65535 {
			ix.errorf("pod %s/%s: container port %s: protocol %q, number %d", p.key.ns, p.key.name, cp.Name, cp.Protocol, cp.ContainerPort)
			continue
		}
		p.ports = append(p.ports, containerPort{name: cp.Name, proto: proto, num: uint16(cp.ContainerPort)})
	}
}

func protocol(p corev1.Protocol) (policy.Protocol, error) {
	switch p {
	case "", corev1.ProtocolTCP:
		return policy.TCP, nil
	case corev1.ProtocolUDP:
		return policy.UDP, nil
	case corev1.ProtocolSCTP:
		return policy.SCTP, nil
	}
	return 0, fmt.Errorf("protocol %q is not TCP, UDP or SCTP", p)
}

// selector reads a label selector; nil selects nothing.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("label selector: %w", err)
	}
	return sel, nil
}

// namespaces is the sorted list of namespaces sel selects.
func (ix *index) namespaces(sel labels.Selector) []string {
	key := sel.String()
	if nss, ok := ix.nsCache[key]; ok {
		return nss
	}
	var nss []string
	for _, ns := range ix.nsNames {
		if sel.Matches(ix.nsLabels[ns]) {
			nss = append(nss, ns)
		}
	}
	ix.nsCache[key] = nss
	return nss
}

// selectPods is the selectable pods of namespaces (named by key) that
// podSel selects.
func (ix *index) selectPods(key string, namespaces []string, podSel labels.Selector) []*podInfo {
	key += "\x00" + podSel.String()
	if ps, ok := ix.podCache[key]; ok {
		return ps
	}
	var ps []*podInfo
	for _, ns := range namespaces {
		for _, p := range ix.byNS[ns] {
			if podSel.Matches(p.labels) {
				ps = append(ps, p)
			}
		}
	}
	ix.podCache[key] = ps
	return ps
}

// inNamespace is the pods of ns that podSel selects.
func (ix *index) inNamespace(ns string, podSel labels.Selector) []*podInfo {
	return ix.selectPods("ns "+ns, []string{ns}, podSel)
}

// inNamespaces is the pods that podSel selects in the namespaces nsSel
// selects.
func (ix *index) inNamespaces(nsSel, podSel labels.Selector) []*podInfo {
	return ix.selectPods("sel "+nsSel.String(), ix.namespaces(nsSel), podSel)
}

// peers is what a rule's peers select, before they become addresses.
type peers struct {
	any    bool
	pods   []*podInfo
	blocks []policy.Block
}

// none says p selects nothing at all.
func (p peers) none() bool { return !p.any && len(p.pods) == 0 && len(p.blocks) == 0 }

func (p peers) model() policy.Peers {
	if p.any {
		return policy.Peers{Any: true}
	}
	bs := slices.Clone(p.blocks)
	for _, pod := range p.pods {
		for _, a := range pod.addrs {
			bs = append(bs, policy.Block{CIDR: netip.PrefixFrom(a, a.BitLen())})
		}
	}
	// Every block is masked, so Compare orders by family, address, then length.
	slices.SortStableFunc(bs, func(a, b policy.Block) int { return a.CIDR.Compare(b.CIDR) })
	return policy.Peers{Blocks: slices.CompactFunc(bs, func(a, b policy.Block) bool {
		return a.CIDR == b.CIDR && slices.Equal(a.Except, b.Except)
	})}
}

// portName is a named port of a rule; anyProto for admin policies, whose
// named ports carry no protocol.
type portName struct {
	name     string
	proto    policy.Protocol
	anyProto bool
}

// portSpec is a rule's ports: every port when all, else the numbered
// ones and the names still to resolve.
type portSpec struct {
	all      bool
	numbered []policy.Port
	named    []portName
}

// resolve is the numbers pod gives the names of ps.
func (ps portSpec) resolve(pod *podInfo) []policy.Port {
	var out []policy.Port
	for _, n := range ps.named {
		for _, cp := range pod.ports {
			pt := policy.Port{Protocol: cp.proto, From: cp.num}
			if cp.name == n.name && (n.anyProto || cp.proto == n.proto) && !slices.Contains(out, pt) {
				out = append(out, pt)
			}
		}
	}
	return out
}

// ruleTmpl is a rule whose named ports are resolved against the local pod
// (ingress).
type ruleTmpl struct {
	id    string
	peers policy.Peers
	ports portSpec
}

// forLocal is t for the local pod; false when no port is left.
func (t ruleTmpl) forLocal(pod *podInfo) (policy.Rule, bool) {
	r := policy.Rule{ID: t.id, Peers: t.peers}
	if t.ports.all {
		return r, true
	}
	r.Ports = append(slices.Clone(t.ports.numbered), t.ports.resolve(pod)...)
	return r, len(r.Ports) > 0
}

// egressRules are the rules of an egress rule whose named ports are
// resolved against each peer pod: see the design notes in policy.go.
func (ix *index) egressRules(id string, p peers, ps portSpec) []policy.Rule {
	if ps.all {
		return []policy.Rule{{ID: id, Peers: p.model()}}
	}
	var out []policy.Rule
	if len(ps.numbered) > 0 {
		out = append(out, policy.Rule{ID: id, Peers: p.model(), Ports: ps.numbered})
	}
	if len(ps.named) == 0 {
		return out
	}
	groups := map[policy.Port][]netip.Addr{}
	for _, c := range ix.candidates(p) {
		for _, pt := range ps.resolve(c.pod) {
			groups[pt] = append(groups[pt], c.addrs...)
		}
	}
	keys := make([]policy.Port, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b policy.Port) int {
		if a.Protocol != b.Protocol {
			return int(a.Protocol) - int(b.Protocol)
		}
		return int(a.From) - int(b.From)
	})
	for _, k := range keys {
		out = append(out, policy.Rule{ID: id + "/" + k.Protocol.String() + "-" + strconv.Itoa(int(k.From)),
			Peers: addrPeers(groups[k]), Ports: []policy.Port{k}})
	}
	return out
}

func addrPeers(as []netip.Addr) policy.Peers {
	var bs []policy.Block
	for _, a := range as {
		bs = append(bs, policy.Block{CIDR: netip.PrefixFrom(a, a.BitLen())})
	}
	return peers{blocks: bs}.model()
}

// candidate is a pod a rule's peers reach, and its addresses they reach.
type candidate struct {
	pod   *podInfo
	addrs []netip.Addr
}

// candidates is the selectable pods among p's peers: the selected ones
// (every address), and those with addresses in one of its blocks (those
// addresses), or every pod for any.
func (ix *index) candidates(p peers) []candidate {
	chosen := map[*podInfo]bool{}
	var out []candidate
	for _, pod := range p.pods {
		if !chosen[pod] {
			chosen[pod] = true
			out = append(out, candidate{pod, pod.addrs})
		}
	}
	if !p.any && len(p.blocks) == 0 {
		return out
	}
	out = out[:0]
	inBlocks := policy.Peers{Blocks: p.blocks}
	for _, ns := range ix.nsNames {
		for _, pod := range ix.byNS[ns] {
			if p.any || chosen[pod] {
				out = append(out, candidate{pod, pod.addrs})
				continue
			}
			if len(p.blocks) == 0 {
				continue
			}
			var as []netip.Addr
			for _, a := range pod.addrs {
				if inBlocks.Contains(a) {
					as = append(as, a)
				}
			}
			if len(as) > 0 {
				out = append(out, candidate{pod, as})
			}
		}
	}
	return out
}
