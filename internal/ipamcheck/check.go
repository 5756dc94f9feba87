// Package ipamcheck cross-checks the cluster's address records against the
// pods that use them and the Subnet status that counts them, and reports
// what is wrong: leaked records, pods holding two addresses of one family,
// running pods whose address has no record, addresses used by two pods,
// records not named after their address, and Subnet counts that differ
// from a recount.
//
// Design: Check is a pure function of one snapshot (lists read one after the
// other, never under a lock, so the cluster keeps serving pods while it is
// taken). A snapshot of a busy cluster can show an allocation or a release
// half done: a record listed before its pod was created, a pod listed
// before its record was deleted. Check therefore ignores objects younger
// than a grace period, and callers that act on a finding (kubectl estuary
// check, repair) confirm it with fresh reads of the objects it names
// (Confirm) before reporting or changing anything. A finding names the
// objects with their UIDs, so a repair acts on exactly what was reported
// and never on a record that replaced it.
package ipamcheck

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Kind is what is wrong.
type Kind string

// Kinds of findings.
const (
	// Leaked: a record whose pod is gone, finished, or another pod of the
	// same name, and that no retention keeps.
	Leaked Kind = "Leaked"
	// TwoAddresses: a pod holds two Bound records of one family.
	TwoAddresses Kind = "TwoAddresses"
	// Missing: a running pod uses an address that no record binds to it.
	Missing Kind = "Missing"
	// SharedAddress: two live pods report the same address.
	SharedAddress Kind = "SharedAddress"
	// Misnamed: a record is not named after its address, so the API
	// server's uniqueness of names does not guard it.
	Misnamed Kind = "Misnamed"
	// CountDrift: a Subnet's status.used differs from its records.
	CountDrift Kind = "CountDrift"
)

// Finding is one thing wrong, with the objects it concerns.
type Finding struct {
	Kind    Kind   `json:"kind"`
	Address string `json:"address,omitempty"`
	// Record is the IPInstance concerned (name), with the UID it had.
	Record    string `json:"record,omitempty"`
	RecordUID string `json:"recordUID,omitempty"`
	// Pod is namespace/name of the pod concerned, with the UID it had.
	Pod    string `json:"pod,omitempty"`
	PodUID string `json:"podUID,omitempty"`
	Subnet string `json:"subnet,omitempty"`
	Detail string `json:"detail"`
}

func (f Finding) String() string { return fmt.Sprintf("%s: %s", f.Kind, f.Detail) }

// Snapshot is what Check reads. Lists may be taken one after the other.
type Snapshot struct {
	Records []estuaryv1.IPInstance
	Pods    []corev1.Pod
	Subnets []estuaryv1.Subnet
	// Taken is when the snapshot was taken; objects created less than
	// Grace before it are not judged.
	Taken time.Time
	Grace time.Duration
}

// Report is the result of a check.
type Report struct {
	Records  int       `json:"records"`
	Pods     int       `json:"pods"`
	Subnets  int       `json:"subnets"`
	Findings []Finding `json:"findings"`
}

// Count returns how many findings are of kind k.
func (r Report) Count(k Kind) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// Check judges one snapshot. Findings are ordered by kind, then address,
// then pod.
func Check(s Snapshot) Report {
	pods := indexPods(s.Pods)
	r := Report{Records: len(s.Records), Pods: len(s.Pods), Subnets: len(s.Subnets)}
	r.Findings = append(r.Findings, checkRecords(s, pods)...)
	r.Findings = append(r.Findings, checkPods(s, pods)...)
	r.Findings = append(r.Findings, checkCounts(s)...)
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Address, b.Address), cmp.Compare(a.Pod, b.Pod))
	})
	return r
}

func indexPods(items []corev1.Pod) map[string]*corev1.Pod {
	out := make(map[string]*corev1.Pod, len(items))
	for i := range items {
		out[items[i].Namespace+"/"+items[i].Name] = &items[i]
	}
	return out
}

func young(s Snapshot, created time.Time) bool {
	return s.Grace > 0 && s.Taken.Sub(created) < s.Grace
}

// addrOf is a record's address without its prefix length.
func addrOf(ipi *estuaryv1.IPInstance) (netip.Addr, bool) {
	p, err := netip.ParsePrefix(ipi.Spec.Address.IP)
	if err != nil {
		return netip.Addr{}, false
	}
	return p.Addr(), true
}

func podKey(ipi *estuaryv1.IPInstance) string {
	return ipi.Spec.Binding.Namespace + "/" + ipi.Spec.Binding.PodName
}

// checkRecords finds misnamed and leaked records and pods with two Bound
// records of one family.
func checkRecords(s Snapshot, pods map[string]*corev1.Pod) []Finding {
	var out []Finding
	type famKey struct {
		pod string
		v6  bool
	}
	bound := map[famKey][]*estuaryv1.IPInstance{}
	for i := range s.Records {
		ipi := &s.Records[i]
		a, ok := addrOf(ipi)
		if !ok || ipi.Name != estuaryv1.InstanceName(a) {
			out = append(out, recordFinding(Misnamed, ipi, nil,
				fmt.Sprintf("ipinstance %s records %s: not named after its address, so nothing stops a second record of it", ipi.Name, ipi.Spec.Address.IP)))
		}
		if young(s, ipi.CreationTimestamp.Time) {
			continue
		}
		pod := pods[podKey(ipi)]
		if why := leakReason(ipi, pod); why != "" {
			out = append(out, recordFinding(Leaked, ipi, pod, fmt.Sprintf("ipinstance %s (%s, subnet %s) is held for pod %s, which %s", ipi.Name, ipi.Spec.Address.IP, ipi.Spec.Subnet, podKey(ipi), why)))
			continue
		}
		if ipi.Status.Phase == estuaryv1.IPInstanceBound && ok {
			k := famKey{podKey(ipi), a.Is6()}
			bound[k] = append(bound[k], ipi)
		}
	}
	for k, recs := range bound {
		if len(recs) < 2 {
			continue
		}
		slices.SortFunc(recs, func(a, b *estuaryv1.IPInstance) int { return cmp.Compare(a.Name, b.Name) })
		names := make([]string, len(recs))
		for i, ipi := range recs {
			names[i] = ipi.Name
		}
		for _, ipi := range recs {
			out = append(out, recordFinding(TwoAddresses, ipi, pods[k.pod], fmt.Sprintf("pod %s holds %d addresses of one family: %v", k.pod, len(recs), names)))
		}
	}
	return out
}

// leakReason says why a record is held for nothing, or "" when its pod (or
// a retention) still wants it.
func leakReason(ipi *estuaryv1.IPInstance, pod *corev1.Pod) string {
	b := ipi.Spec.Binding
	if ipi.Status.Phase == estuaryv1.IPInstanceRetained {
		// Held for the pod that will take this one's place; the manager
		// decides when its owner no longer wants it.
		return ""
	}
	switch {
	case pod == nil:
		return "does not exist"
	case b.PodUID != "" && string(pod.UID) != b.PodUID:
		return fmt.Sprintf("is another pod now (uid %s, record for uid %s)", pod.UID, b.PodUID)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return fmt.Sprintf("has finished (%s)", pod.Status.Phase)
	}
	return ""
}

func recordFinding(k Kind, ipi *estuaryv1.IPInstance, pod *corev1.Pod, detail string) Finding {
	f := Finding{Kind: k, Address: ipi.Spec.Address.IP, Record: ipi.Name, RecordUID: string(ipi.UID),
		Pod: podKey(ipi), Subnet: ipi.Spec.Subnet, Detail: detail}
	if pod != nil {
		f.PodUID = string(pod.UID)
	}
	return f
}

// checkPods finds running pods whose addresses have no record bound to
// them, and addresses two live pods report.
func checkPods(s Snapshot, pods map[string]*corev1.Pod) []Finding {
	recorded := map[string]*estuaryv1.IPInstance{}
	for i := range s.Records {
		if a, ok := addrOf(&s.Records[i]); ok {
			recorded[a.String()] = &s.Records[i]
		}
	}
	inSubnet := subnetPrefixes(s.Subnets)
	users := map[string][]*corev1.Pod{}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range pods {
			if !yield(k) {
				return
			}
		}
	})
	var out []Finding
	for _, k := range keys {
		p := pods[k]
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, pip := range p.Status.PodIPs {
			a, err := netip.ParseAddr(pip.IP)
			if err != nil || !inSubnet(a) {
				continue
			}
			users[a.String()] = append(users[a.String()], p)
			if young(s, p.CreationTimestamp.Time) || p.DeletionTimestamp != nil {
				continue
			}
			ipi := recorded[a.String()]
			if ipi == nil || podKey(ipi) != k || (ipi.Spec.Binding.PodUID != "" && ipi.Spec.Binding.PodUID != string(p.UID)) {
				out = append(out, Finding{Kind: Missing, Address: a.String(), Pod: k, PodUID: string(p.UID),
					Detail: fmt.Sprintf("pod %s uses %s, which %s", k, a, recordedFor(ipi))})
			}
		}
	}
	for addr, ps := range users {
		if len(ps) < 2 {
			continue
		}
		names := make([]string, len(ps))
		for i, p := range ps {
			names[i] = p.Namespace + "/" + p.Name
		}
		for _, p := range ps {
			out = append(out, Finding{Kind: SharedAddress, Address: addr, Pod: p.Namespace + "/" + p.Name, PodUID: string(p.UID),
				Detail: fmt.Sprintf("address %s is used by %d pods: %v", addr, len(ps), names)})
		}
	}
	return out
}

func recordedFor(ipi *estuaryv1.IPInstance) string {
	if ipi == nil {
		return "has no record"
	}
	return fmt.Sprintf("is recorded for pod %s (uid %q) in ipinstance %s", podKey(ipi), ipi.Spec.Binding.PodUID, ipi.Name)
}

// subnetPrefixes reports whether an address lies in any subnet: addresses
// outside every subnet (another plugin's, a node's) are not estuary's.
func subnetPrefixes(subnets []estuaryv1.Subnet) func(netip.Addr) bool {
	var ps []netip.Prefix
	for _, sn := range subnets {
		if p, err := netip.ParsePrefix(sn.Spec.Range.CIDR); err == nil {
			ps = append(ps, p)
		}
	}
	return func(a netip.Addr) bool {
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
}

// checkCounts compares every Subnet's status.used with its records.
func checkCounts(s Snapshot) []Finding {
	count := map[string]int64{}
	for i := range s.Records {
		count[s.Records[i].Spec.Subnet]++
	}
	var out []Finding
	for _, sn := range s.Subnets {
		if sn.Status.Used != count[sn.Name] {
			out = append(out, Finding{Kind: CountDrift, Subnet: sn.Name,
				Detail: fmt.Sprintf("subnet %s: status.used %d, %d records", sn.Name, sn.Status.Used, count[sn.Name])})
		}
	}
	return out
}

// Stable keeps the findings of later that first also had, about the same
// objects: what a check reports only after it has seen it twice, some time
// apart, is not an allocation or release caught half done.
func Stable(first, later Report) Report {
	seen := map[Finding]bool{}
	for _, f := range first.Findings {
		seen[identity(f)] = true
	}
	out := later
	out.Findings = nil
	for _, f := range later.Findings {
		if seen[identity(f)] {
			out.Findings = append(out.Findings, f)
		}
	}
	return out
}

// identity is a finding without its free text: counts in a CountDrift
// detail may change between snapshots while the drift stays.
func identity(f Finding) Finding {
	f.Detail = ""
	return f
}
