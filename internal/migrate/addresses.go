package migrate

// Addresses: each hybridnet IPInstance held for a workload becomes an
// estuary record that the manager adopts as it would one of its own.
//
//   - A StatefulSet's address (referredObject StatefulSet, with its
//     ordinal) is kept for the pod of that ordinal: Bound to the pod when
//     it runs now, Retained for its name when it does not. Either way the
//     StatefulSet's next pod of that ordinal gets it back, for as long as
//     the StatefulSet has the ordinal (a scale-down releases it, which
//     hybridnet never did).
//   - Any other live pod's address is Bound to the pod with the
//     workload's retention (RetainTTL): when the pod goes, during the
//     switch, the address is kept for its workload (the Deployment of its
//     ReplicaSet, ...) and its next pod takes it. hybridnet releases such
//     an address with its pod; the retention keeps it across the switch
//     only, since the next pod's own annotations decide from then on.
//   - The MAC hybridnet recorded goes with the address.
//
// A virtual machine's address (hybridnet's VMIPRetain) is kept for the
// VirtualMachine, Bound to its virt-launcher pod when it runs, Retained for
// the machine otherwise.
//
// An address whose pod is gone or finished (hybridnet releases it), of
// another kind of owner, or that estuary would not hand out (outside its
// subnet's range, excluded, a node's), is left out and reported.

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// addresses translates the IPInstances, then sets each pod's address count
// on its Bound records.
func (t *translator) addresses(items []*unstructured.Unstructured) {
	nodes := netmodel.NodeAddresses(t.in.Existing.Nodes)
	seen := map[string]string{} // record name -> the hybridnet object it came from
	for _, u := range items {
		obj := objectName("IPInstance", u)
		ipi, why := t.address(obj, u)
		if why != "" {
			t.out.Report.skip(obj, "", "%s", why)
			continue
		}
		a := netip.MustParsePrefix(ipi.Spec.Address.IP).Addr()
		if na, ok := nodes[a]; ok {
			t.out.Report.skip(obj, "", "%s is the %s of node %q; estuary never gives a node's address to a pod", a, na.Type, na.Node)
			continue
		}
		if first, dup := seen[ipi.Name]; dup {
			t.out.Report.skip(obj, "", "%s is recorded twice in hybridnet; %s is migrated", a, first)
			continue
		}
		seen[ipi.Name] = obj
		t.out.IPInstances = append(t.out.IPInstances, ipi)
	}
	count := map[string]int{}
	for _, ipi := range t.out.IPInstances {
		if ipi.Status.Phase == estuaryv1.IPInstanceBound {
			count[ipi.Spec.Binding.Namespace+"/"+ipi.Spec.Binding.PodName]++
		}
	}
	for _, ipi := range t.out.IPInstances {
		if ipi.Status.Phase == estuaryv1.IPInstanceBound {
			n := count[ipi.Spec.Binding.Namespace+"/"+ipi.Spec.Binding.PodName]
			ipi.Annotations = map[string]string{estuaryv1.AnnotationAddresses: strconv.Itoa(n)}
		}
	}
}

// address is the record of one hybridnet IPInstance, or why there is none.
func (t *translator) address(obj string, u *unstructured.Unstructured) (*estuaryv1.IPInstance, string) {
	if u.GetDeletionTimestamp() != nil {
		return nil, "is being deleted"
	}
	hn, unknown, err := decodeIPInstance(u)
	if err != nil {
		return nil, fmt.Sprintf("cannot be read: %v", err)
	}
	for _, f := range unknown {
		t.out.Report.skip(obj, f, "a field kubectl estuary migrate does not know; not migrated")
	}
	sn := t.subnets[hn.Spec.Subnet]
	if sn == nil {
		return nil, fmt.Sprintf("its subnet %q is not migrated", hn.Spec.Subnet)
	}
	a, prefix, why := addressIn(hn.Spec.Address.IP, sn)
	if why != "" {
		return nil, why
	}
	ipi := &estuaryv1.IPInstance{ObjectMeta: objectMeta(estuaryv1.InstanceName(a))}
	ipi.SetGroupVersionKind(estuaryv1.GroupVersion.WithKind("IPInstance"))
	ipi.Labels[estuaryv1.LabelNamespace] = u.GetNamespace()
	ipi.Labels[estuaryv1.LabelSubnet] = sn.Name
	ipi.Spec = estuaryv1.IPInstanceSpec{
		Network: sn.Spec.Network,
		Subnet:  sn.Name,
		Address: estuaryv1.InstanceAddress{
			IP:      netip.PrefixFrom(a, prefix.Bits()).String(),
			Version: sn.Spec.Range.Version,
			Gateway: sn.Spec.Range.Gateway,
			NetID:   netmodel.NetID(&t.networks[sn.Spec.Network].Spec, &sn.Spec),
		},
		Binding: estuaryv1.Binding{Namespace: u.GetNamespace()},
	}
	if mac := hn.Spec.Address.MAC; mac != "" {
		if hw, err := net.ParseMAC(mac); err == nil && len(hw) == 6 && hw[0]&1 == 0 {
			ipi.Spec.Address.MAC = hw.String()
		} else {
			t.out.Report.skip(obj, "spec.address.mac", "%q is not a unicast 48-bit MAC address; the address is migrated without it", mac)
		}
	}
	if why := t.bind(&hn, u, ipi); why != "" {
		return nil, why
	}
	return ipi, ""
}

// addressIn parses hybridnet's address (with or without its prefix
// length) and checks that subnet sn may hold it.
func addressIn(text string, sn *estuaryv1.Subnet) (netip.Addr, netip.Prefix, string) {
	var a netip.Addr
	if p, err := netip.ParsePrefix(text); err == nil {
		a = p.Addr()
	} else if a, err = netip.ParseAddr(text); err != nil {
		return a, netip.Prefix{}, fmt.Sprintf("spec.address.ip %q is not an address", text)
	}
	prefix := netip.MustParsePrefix(sn.Spec.Range.CIDR)
	if !prefix.Contains(a) {
		return a, prefix, fmt.Sprintf("%s is outside its subnet %s (%s)", a, sn.Name, prefix)
	}
	cfg, err := netmodel.SubnetConfig(sn)
	if err == nil {
		err = ipam.CheckAddr(cfg, a)
	}
	if err != nil {
		return a, prefix, fmt.Sprintf("estuary would not hand out %s in subnet %s: %v", a, sn.Name, err)
	}
	return a, prefix, ""
}

// bind fills ipi's binding, phase and retention from hybridnet's binding
// and what is known of the pod, or says why the address is not kept.
func (t *translator) bind(hn *hnIPInstance, u *unstructured.Unstructured, ipi *estuaryv1.IPInstance) string {
	b := &hn.Spec.Binding
	podName := firstOf(b.PodName, hn.Status.PodName, u.GetLabels()[Group+"/pod"])
	ref := b.ReferredObject
	if ref.Kind == "" {
		if c := metav1.GetControllerOf(u); c != nil {
			ref.Kind, ref.Name, ref.UID = c.Kind, c.Name, string(c.UID)
		}
	}
	if podName == "" {
		return "names no pod (spec.binding.podName and status.podName are empty)"
	}
	ns := u.GetNamespace()
	pod, known := t.in.Pods[ns+"/"+podName]
	live := known && !pod.Finished && (b.PodUID == "" || b.PodUID == pod.UID)
	ipi.Spec.Binding.PodName = podName
	ipi.Labels[estuaryv1.LabelPod] = podName
	switch ref.Kind {
	case workload.KindStatefulSet:
		return t.bindStateful(hn, ref.Name, ref.UID, podName, pod, live, ipi)
	case workload.KindPod, "":
	case workload.KindVirtualMachineInstance, workload.KindVirtualMachine:
		return t.bindMachine(u, ref.Kind, ref.Name, pod, live, ipi)
	default:
		return fmt.Sprintf("held for %s %s/%s: estuary keeps addresses by ordinal for StatefulSets only", ref.Kind, ns, ref.Name)
	}
	switch {
	case t.in.Pods == nil:
		return fmt.Sprintf("pod %s/%s: its workload is not known without the pods (run against the cluster, or give the pods and their ReplicaSets and Jobs with -f)", ns, podName)
	case !known:
		return fmt.Sprintf("pod %s/%s is gone: hybridnet releases its address", ns, podName)
	case pod.Finished:
		return fmt.Sprintf("pod %s/%s has finished: hybridnet releases its address", ns, podName)
	case !live:
		return fmt.Sprintf("pod %s/%s has UID %s, not the %s the address was given to: hybridnet releases it", ns, podName, pod.UID, b.PodUID)
	}
	bound(ipi, pod)
	o := pod.Owner
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: o.Kind, Name: o.Name, UID: o.UID}
	ipi.Spec.Retention = &estuaryv1.Retention{TTL: &metav1.Duration{Duration: t.in.RetainTTL}}
	return ""
}

// bindStateful keeps a StatefulSet's address for the pod of its ordinal:
// Bound to the pod when it runs with it now, Retained otherwise.
func (t *translator) bindStateful(hn *hnIPInstance, set, uid, podName string, pod Pod, live bool, ipi *estuaryv1.IPInstance) string {
	ns := ipi.Spec.Binding.Namespace
	ordinal, ok := ordinalOf(set, podName)
	if s := hn.Spec.Binding.Stateful; s != nil && s.Index != nil {
		ordinal, ok = *s.Index, true
	}
	if !ok {
		return fmt.Sprintf("StatefulSet %s/%s: pod %s has no ordinal (spec.binding.stateful.index)", ns, set, podName)
	}
	if podName != fmt.Sprintf("%s-%d", set, ordinal) {
		return fmt.Sprintf("StatefulSet %s/%s: pod %s is not the pod of ordinal %d", ns, set, podName, ordinal)
	}
	if t.in.Sets != nil {
		s, ok := t.in.Sets[ns+"/"+set]
		switch {
		case !ok:
			return fmt.Sprintf("StatefulSet %s/%s is gone: estuary would release the address", ns, set)
		case ordinal >= s.Replicas:
			return fmt.Sprintf("StatefulSet %s/%s has %d replicas, so no pod of ordinal %d: hybridnet kept the address after a scale-down, estuary would release it",
				ns, set, s.Replicas, ordinal)
		case uid == "":
			uid = s.UID
		}
	}
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: workload.KindStatefulSet, Name: set, UID: uid}
	ipi.Spec.Binding.StatefulOrdinal = ptr.To(ordinal)
	if live && pod.Owner.Kind == workload.KindStatefulSet && pod.Owner.Name == set {
		bound(ipi, pod)
		return ""
	}
	ipi.Status.Phase = estuaryv1.IPInstanceRetained
	return ""
}

// bindMachine keeps a virtual machine's address for the machine:
// hybridnet labels it with the VirtualMachine's name (its binding names the
// VirtualMachine, or the VirtualMachineInstance), so it goes to the
// VirtualMachine, or to an instance no machine is named for. It is Bound to
// its pod when that pod runs now as the same machine's, Retained for the
// machine (without expiry, until the machine is deleted) otherwise.
func (t *translator) bindMachine(u *unstructured.Unstructured, kind, name string, pod Pod, live bool, ipi *estuaryv1.IPInstance) string {
	if vm := u.GetLabels()[Group+"/vm"]; vm != "" {
		kind, name = workload.KindVirtualMachine, vm
	}
	owner := workload.Ref{Namespace: ipi.Spec.Binding.Namespace, Kind: kind, Name: name}
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: kind, Name: name}
	ipi.Spec.Retention = &estuaryv1.Retention{}
	if live && pod.Owner.Same(owner) {
		ipi.Spec.Binding.Owner.UID = pod.Owner.UID
		bound(ipi, pod)
		return ""
	}
	ipi.Status.Phase = estuaryv1.IPInstanceRetained
	return ""
}

// ordinalOf reads a StatefulSet pod's ordinal from its name, <set>-<n>.
func ordinalOf(set, pod string) (int32, bool) {
	suffix, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(suffix, 10, 32)
	return int32(n), err == nil && n >= 0
}

// bound binds ipi to pod, which runs with the address now.
func bound(ipi *estuaryv1.IPInstance, pod Pod) {
	ipi.Spec.Binding.PodUID, ipi.Spec.Binding.NodeName = pod.UID, pod.Node
	if pod.Node != "" {
		ipi.Labels[estuaryv1.LabelNode] = pod.Node
	}
	ipi.Status.Phase = estuaryv1.IPInstanceBound
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
