// Package ipamcheck cross-checks the cluster's address records against the
// pods that use them and the Subnet status that counts them, and reports
// what is wrong: leaked records, retained records kept past their expiry,
// pods holding two addresses of one family, pods with fewer families
// recorded than their records promise, running pods whose address has no
// record, addresses used by two pods, records not named after their
// address, and Subnet counts that differ from a recount. Given a way to
// read every node's daemon endpoints (NodeEndpoints), it also compares what
// each node plumbed with the records and pods: addresses plumbed without or
// against their record, Bound records of running pods their node did not
// plumb, endpoints of pods that no longer exist, and nodes whose daemon
// could not be read.
//
// A record no pod uses is not wrong by itself: a Reserved record holds an
// administrator's reservation until it is released by hand, and a Retained
// record holds an address for its owner's next pod (of any owner kind) until
// its status.expiresAt, or forever when that is unset.
//
// Design: Check is a pure function of one snapshot (lists read one after the
// other, never under a lock, so the cluster keeps serving pods while it is
// taken). A snapshot of a busy cluster can show an allocation or a release
// half done: a record listed before its pod was created, a pod listed
// before its record was deleted. Check therefore ignores objects younger
// than a grace period, and callers confirm a finding with fresh reads
// before reporting or changing anything: kubectl estuary check reports only
// what two snapshots, some time apart, both show (Stable), and repair
// judges each finding again on a fresh read of the objects it names with
// the rule that found it (Recheck). A finding names the objects with their
// UIDs, so a repair acts on exactly what was reported and never on a record
// that replaced it.
package ipamcheck

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Kind is what is wrong.
type Kind string

// Kinds of findings.
const (
	// Leaked: a Bound record whose pod is gone, finished, or another pod
	// of the same name.
	Leaked Kind = "Leaked"
	// ExpiredRetention: a Retained record whose status.expiresAt passed
	// more than ExpiryGrace ago, and that the manager has not released.
	ExpiredRetention Kind = "ExpiredRetention"
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
	// MissingFamily: a live pod's Bound records say it has more addresses
	// (their estuaryv1.AnnotationAddresses count) than it has Bound records
	// of distinct families: a dual-stack pod lost one family's record, and
	// its node waits for that address or set the pod up without it.
	MissingFamily Kind = "MissingFamily"
)

// ExpiryGrace is how long after its status.expiresAt a Retained record may
// still exist before it is reported: the manager releases expired records
// on its own schedule, not at the very instant they expire.
const ExpiryGrace = 5 * time.Minute

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
	// Node is the node concerned (node findings), and Endpoint the daemon
	// endpoint (containerID/ifname) concerned.
	Node     string `json:"node,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Detail   string `json:"detail"`
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
	// Nodes are the daemon endpoints of every node read, by node name;
	// nil skips the node pass.
	Nodes map[string]NodeRead
}

// Report is the result of a check.
type Report struct {
	Records int `json:"records"`
	Pods    int `json:"pods"`
	Subnets int `json:"subnets"`
	// Nodes and Endpoints count the nodes whose daemon endpoints were read
	// and their endpoints (0 when the node pass was skipped).
	Nodes     int `json:"nodes,omitempty"`
	Endpoints int `json:"endpoints,omitempty"`
	// Grace is the snapshot's Grace ("30s"): objects younger than it were
	// not judged. A repair re-checks the findings with the same grace.
	Grace    string    `json:"grace,omitempty"`
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
	r := Report{Records: len(s.Records), Pods: len(s.Pods), Subnets: len(s.Subnets), Grace: s.Grace.String()}
	r.Findings = append(r.Findings, checkRecords(s, pods)...)
	r.Findings = append(r.Findings, checkPods(s, pods)...)
	r.Findings = append(r.Findings, checkCounts(s)...)
	if s.Nodes != nil {
		for _, n := range s.Nodes {
			if n.Err == nil {
				r.Nodes++
				r.Endpoints += len(n.Endpoints)
			}
		}
		r.Findings = append(r.Findings, checkNodes(s, pods)...)
	}
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Address, b.Address), cmp.Compare(a.Pod, b.Pod),
			cmp.Compare(a.Node, b.Node), cmp.Compare(a.Endpoint, b.Endpoint))
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
		pod := podOf(ipi, pods)
		if k, detail := Judge(ipi, pod, s.Taken); k != "" {
			out = append(out, recordFinding(k, ipi, pod, detail))
		}
	}
	out = append(out, missingFamilies(s, pods)...)
	for k, recs := range boundByFamily(s, pods) {
		if len(recs) < 2 {
			continue
		}
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

// famKey is a pod (namespace/name) and an address family.
type famKey struct {
	pod string
	v6  bool
}

// boundByFamily groups, by pod and family, the records TwoAddresses counts:
// Bound records with a readable address, older than the grace, that Judge
// finds nothing wrong with. Each group is sorted by name.
func boundByFamily(s Snapshot, pods map[string]*corev1.Pod) map[famKey][]*estuaryv1.IPInstance {
	bound := map[famKey][]*estuaryv1.IPInstance{}
	for i := range s.Records {
		ipi := &s.Records[i]
		a, ok := addrOf(ipi)
		if !ok || ipi.Status.Phase != estuaryv1.IPInstanceBound || young(s, ipi.CreationTimestamp.Time) {
			continue
		}
		if k, _ := Judge(ipi, podOf(ipi, pods), s.Taken); k != "" {
			continue
		}
		k := famKey{podKey(ipi), a.Is6()}
		bound[k] = append(bound[k], ipi)
	}
	for _, recs := range bound {
		slices.SortFunc(recs, func(a, b *estuaryv1.IPInstance) int { return cmp.Compare(a.Name, b.Name) })
	}
	return bound
}

// missingFamilies finds live pods, older than the grace, whose Bound
// records (those Judge finds nothing wrong with) promise more addresses
// than they cover families: each record carries the pod's address count.
// A record without a count promises nothing.
func missingFamilies(s Snapshot, pods map[string]*corev1.Pod) []Finding {
	type promise struct {
		count int
		fams  map[bool][]string // v6 -> the records' addresses
	}
	byPod := map[string]*promise{}
	for k, recs := range boundByFamily(s, pods) {
		p := byPod[k.pod]
		if p == nil {
			p = &promise{fams: map[bool][]string{}}
			byPod[k.pod] = p
		}
		for _, ipi := range recs {
			p.count = max(p.count, countOf(ipi))
			p.fams[k.v6] = append(p.fams[k.v6], ipi.Spec.Address.IP)
		}
	}
	var out []Finding
	for k, p := range byPod {
		pod := pods[k]
		if len(p.fams) >= p.count || pod == nil || pod.DeletionTimestamp != nil || young(s, pod.CreationTimestamp.Time) {
			continue
		}
		has, lacks := family.IPv4, family.IPv6
		if _, v6 := p.fams[true]; v6 {
			has, lacks = lacks, has
		}
		out = append(out, Finding{Kind: MissingFamily, Address: strings.Join(p.fams[has == family.IPv6], ","), Pod: k, PodUID: string(pod.UID),
			Detail: fmt.Sprintf("pod %s has %d of the %d addresses its records promise: %s %s, no %s record; its node waits for it or set the pod up without it",
				k, len(p.fams), p.count, has, strings.Join(p.fams[has == family.IPv6], ","), lacks)})
	}
	return out
}

// countOf is the pod's address count a record carries, or 0.
func countOf(ipi *estuaryv1.IPInstance) int {
	n, err := strconv.Atoi(ipi.Annotations[estuaryv1.AnnotationAddresses])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Recheck judges again, in s, the record a Leaked, ExpiredRetention or
// TwoAddresses finding names, with the rules Check found it by. s is a
// fresh read: the record, the pod its binding names (when it exists), and,
// for TwoAddresses, every record bound to that pod (s may hold more; other
// objects do not change the verdict). It returns Check's finding about the
// record now (same kind, name and UID) and, for TwoAddresses, the records
// Check counts together with it (the pod's Bound records of its family,
// sorted by name, its own included), or false when Check would not report
// it now.
func Recheck(s Snapshot, f Finding) (Finding, []*estuaryv1.IPInstance, bool) {
	pods := indexPods(s.Pods)
	for _, g := range checkRecords(s, pods) {
		if g.Kind != f.Kind || g.Record != f.Record || g.RecordUID != f.RecordUID {
			continue
		}
		if g.Kind != TwoAddresses {
			return g, nil, true
		}
		for _, recs := range boundByFamily(s, pods) {
			if slices.ContainsFunc(recs, func(ipi *estuaryv1.IPInstance) bool { return string(ipi.UID) == f.RecordUID }) {
				return g, recs, true
			}
		}
	}
	return Finding{}, nil, false
}

// podOf is the pod a record names, or nil (a reservation no pod used yet
// names none).
func podOf(ipi *estuaryv1.IPInstance, pods map[string]*corev1.Pod) *corev1.Pod {
	if ipi.Spec.Binding.PodName == "" {
		return nil
	}
	return pods[podKey(ipi)]
}

// Judge says what is wrong with one record at time now, given the pod its
// binding names (nil when no such pod exists): Leaked or ExpiredRetention
// with a detail naming the record, or "" when nothing is. A Reserved record
// is never wrong; a Retained one only once its expiry is more than
// ExpiryGrace past; a Bound one when its pod is gone, another pod of the
// same name, or finished.
func Judge(ipi *estuaryv1.IPInstance, pod *corev1.Pod, now time.Time) (Kind, string) {
	switch ipi.Status.Phase {
	case estuaryv1.IPInstanceReserved:
		return "", ""
	case estuaryv1.IPInstanceRetained:
		exp := ipi.Status.ExpiresAt
		if exp == nil || now.Sub(exp.Time) <= ExpiryGrace {
			return "", ""
		}
		o := ipi.Spec.Binding.Owner
		return ExpiredRetention, fmt.Sprintf("ipinstance %s (%s, subnet %s): expired retention not released: retained for %s %s/%s until %s, %s ago",
			ipi.Name, ipi.Spec.Address.IP, ipi.Spec.Subnet, o.Kind, ipi.Spec.Binding.Namespace, o.Name,
			exp.UTC().Format(time.RFC3339), now.Sub(exp.Time).Round(time.Second))
	}
	if why := leakReason(ipi, pod); why != "" {
		return Leaked, fmt.Sprintf("ipinstance %s (%s, subnet %s) is held for pod %s, which %s", ipi.Name, ipi.Spec.Address.IP, ipi.Spec.Subnet, podKey(ipi), why)
	}
	return "", ""
}

// leakReason says why a Bound record is held for nothing, or "" when its
// pod still uses it.
func leakReason(ipi *estuaryv1.IPInstance, pod *corev1.Pod) string {
	b := ipi.Spec.Binding
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
		Subnet: ipi.Spec.Subnet, Detail: detail}
	if ipi.Spec.Binding.PodName != "" {
		f.Pod = podKey(ipi)
	}
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
	if ipi.Spec.Binding.PodName == "" {
		o := ipi.Spec.Binding.Owner
		return fmt.Sprintf("is reserved for %s %s/%s in ipinstance %s, bound to no pod", o.Kind, ipi.Spec.Binding.Namespace, o.Name, ipi.Name)
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
// apart, is not an allocation or release caught half done. A node later
// could not read is kept whatever first saw: its plumbing went unchecked.
func Stable(first, later Report) Report {
	seen := map[Finding]bool{}
	for _, f := range first.Findings {
		seen[identity(f)] = true
	}
	out := later
	out.Findings = nil
	for _, f := range later.Findings {
		if seen[identity(f)] || f.Kind == NodeUnreadable {
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
