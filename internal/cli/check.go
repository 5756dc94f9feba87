package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/ipamcheck"
)

// ErrProblems is returned (wrapped) when check finds something wrong.
var ErrProblems = errors.New("problems found")

// ExitCode is the process exit code for err: 0 for none, 3 when a check
// found problems, 1 for any other failure.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrProblems):
		return 3
	}
	return 1
}

// checkFlags are check's options.
type checkFlags struct {
	output          string
	grace, interval time.Duration
	skipNodes       bool
	daemonNamespace string
	daemonSelector  string
}

func checkCmd(o *options) *cobra.Command {
	var f checkFlags
	c := &cobra.Command{
		Use:   "check",
		Short: "Cross-check address records, pods, Subnet counts and each node's plumbing; exit 3 when anything is wrong",
		Long: `check reads every pod, IPInstance and Subnet (no lock: the cluster keeps serving
pods), twice, interval apart, and reports what both reads show wrong: leaked records,
retained records left more than 5 minutes past their expiry, pods holding two addresses
of one family, pods whose records promise more families than they have (a dual-stack
pod that lost one family's record), running pods whose address has no record, addresses two pods use,
records not named after their address, and Subnet counts that differ from a recount.
Reserved records, and Retained ones not yet expired, are not wrong. Objects younger
than --grace are not judged. With -o json the report can be given to
'repair --from-report'.

Unless --skip-nodes is given, each read also runs 'estuary-daemon endpoints' in every
node's daemon pod (pods/exec: it needs create on pods/exec in --daemon-namespace) and
reports addresses a node plumbed without or against their record, Bound records of
running pods their node did not plumb, endpoints of pods that no longer exist, and
nodes whose daemon could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkReportFormat("check", f.output); err != nil {
				return err
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			nodes, err := f.nodes(o, k)
			if err != nil {
				return fmt.Errorf("check: %w", err)
			}
			r, err := ipamcheck.CheckTwiceNodes(cmd.Context(), k, nodes, f.grace, f.interval)
			if err != nil {
				return fmt.Errorf("check: %w", err)
			}
			if err := printReport(o.streams, r, f.output); err != nil {
				return err
			}
			if len(r.Findings) > 0 {
				return fmt.Errorf("check: %d %w", len(r.Findings), ErrProblems)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&f.output, "output", "o", "text", reportFormats)
	c.Flags().DurationVar(&f.grace, "grace", defaultGrace, "do not judge pods, records and node endpoints younger than this")
	c.Flags().DurationVar(&f.interval, "interval", 5*time.Second, "time between the two reads that must agree")
	c.Flags().BoolVar(&f.skipNodes, "skip-nodes", false, "do not read the daemons' endpoints (no pods/exec)")
	c.Flags().StringVar(&f.daemonNamespace, "daemon-namespace", defaultDaemonNamespace, "namespace of the estuary-daemon pods")
	c.Flags().StringVar(&f.daemonSelector, "daemon-selector", defaultDaemonSelector, "label selector of the estuary-daemon pods")
	return c
}

// nodes reads the daemons' endpoints, or nil with --skip-nodes.
func (f checkFlags) nodes(o *options, k client.Reader) (ipamcheck.NodeEndpoints, error) {
	if f.skipNodes {
		return nil, nil
	}
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	return newDaemonEndpoints(cfg, k, f.daemonNamespace, f.daemonSelector)
}

func printReport(s Streams, r ipamcheck.Report, output string) error {
	if output != "text" {
		return report(s.Out, output, r)
	}
	if err := say(s.Out, "checked %d records, %d pods, %d subnets, %d endpoints on %d nodes: %d problems",
		r.Records, r.Pods, r.Subnets, r.Endpoints, r.Nodes, len(r.Findings)); err != nil {
		return err
	}
	if len(r.Findings) == 0 {
		return nil
	}
	t := newTable()
	t.row("KIND\tADDRESS\tPOD\tDETAIL\n")
	for _, f := range r.Findings {
		t.row("%s\t%s\t%s\t%s\n", f.Kind, orDash(f.Address), orDash(f.Pod), f.Detail)
	}
	return t.writeTo(s.Out)
}

func repairCmd(o *options) *cobra.Command {
	var from string
	var yes bool
	c := &cobra.Command{
		Use:   "repair --from-report FILE",
		Short: "Release the leaked, expired and extra records a check reported, and nothing else (never for node findings)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return errors.New("repair: --from-report is required (the output of 'check -o json')")
			}
			b, err := os.ReadFile(from) //nolint:gosec // G304: reading the report the user names is the command
			if err != nil {
				return fmt.Errorf("repair: read report: %w", err)
			}
			var r ipamcheck.Report
			// The report is the first JSON value: a report captured with
			// 2>&1 ends with the plugin's exit message.
			if err := json.NewDecoder(bytes.NewReader(b)).Decode(&r); err != nil {
				return fmt.Errorf("repair: %s is not a check report: %w", from, err)
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			return repair(cmd.Context(), k, o.streams, r, yes)
		},
	}
	c.Flags().StringVar(&from, "from-report", "", "report written by 'kubectl estuary check -o json'")
	c.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return c
}

// repair releases what the report names and still holds: a leaked record
// (same UID, its pod still gone or finished, nothing keeping it), a
// retained record still past its expiry, and, of a pod's two records of
// one family, one the pod does not use. Each finding is judged again with
// the rule check found it by (ipamcheck.Recheck, with the report's grace);
// other findings are left to the manager and reported as such; node
// findings (what a node plumbed) are never acted on: no record can be
// released safely for them.
func repair(ctx context.Context, k client.Client, s Streams, r ipamcheck.Report, yes bool) error {
	grace, err := reportGrace(r)
	if err != nil {
		return err
	}
	plan, notes := planRepair(ctx, k, r, grace)
	for _, n := range notes {
		if err := say(s.Out, "%s", n); err != nil {
			return err
		}
	}
	if len(plan) == 0 {
		return say(s.Out, "nothing to release")
	}
	if !yes && !confirm(s, fmt.Sprintf("release %d record(s) %v", len(plan), recordNames(plan))) {
		return errors.New("repair: not confirmed; nothing changed")
	}
	var errs []error
	for _, ipi := range plan {
		if err := deleteRecord(ctx, k, ipi); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, say(s.Out, "released %s (%s)", ipi.Spec.Address.IP, holder(ipi)))
	}
	return errors.Join(errs...)
}

// defaultGrace is check's --grace default, and the grace a repair uses for
// a report that does not say its own.
const defaultGrace = 30 * time.Second

// reportGrace is the grace the report's check judged with.
func reportGrace(r ipamcheck.Report) (time.Duration, error) {
	if r.Grace == "" {
		return defaultGrace, nil
	}
	g, err := time.ParseDuration(r.Grace)
	if err != nil || g < 0 {
		return 0, fmt.Errorf("repair: the report's grace %q is not a duration", r.Grace)
	}
	return g, nil
}

func recordNames(recs []*estuaryv1.IPInstance) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Name
	}
	return out
}

// planRepair re-reads every object a finding names and returns the records
// to release, with a note for each finding it leaves alone.
func planRepair(ctx context.Context, k client.Client, r ipamcheck.Report, grace time.Duration) ([]*estuaryv1.IPInstance, []string) {
	var plan []*estuaryv1.IPInstance
	var notes []string
	for _, f := range r.Findings {
		switch {
		case ipamcheck.IsNodeKind(f.Kind):
			notes = append(notes, fmt.Sprintf("left alone: %s (a node finding: repair releases nothing for it; see docs/ipam-tools.md)", f))
			continue
		case f.Kind == ipamcheck.Leaked, f.Kind == ipamcheck.ExpiredRetention, f.Kind == ipamcheck.TwoAddresses:
		default:
			notes = append(notes, fmt.Sprintf("left alone: %s (the manager repairs it, or there is nothing to release)", f))
			continue
		}
		ipi, why := recheck(ctx, k, f, grace)
		if why != "" {
			notes = append(notes, fmt.Sprintf("left alone: %s: %s", f, why))
			continue
		}
		if !slices.ContainsFunc(plan, func(p *estuaryv1.IPInstance) bool { return p.Name == ipi.Name }) {
			plan = append(plan, ipi)
		}
	}
	return plan, notes
}

// recheck reads a finding's record and pod again, and for TwoAddresses
// every record of the pod, and returns the record if it should still be
// released, or why not. The finding must still hold by check's own rule
// (ipamcheck.Recheck) for the same record; a leak or an expired retention
// must also not be used by a pod or, for a leak, kept for its owner; of a
// pod's two addresses, only one the same pod does not use while it uses
// another of them is released.
func recheck(ctx context.Context, k client.Client, f ipamcheck.Finding, grace time.Duration) (*estuaryv1.IPInstance, string) {
	ipi := &estuaryv1.IPInstance{}
	if err := k.Get(ctx, client.ObjectKey{Name: f.Record}, ipi); err != nil {
		return nil, fmt.Sprintf("ipinstance %s cannot be read now (%v)", f.Record, err)
	}
	if string(ipi.UID) != f.RecordUID {
		return nil, fmt.Sprintf("ipinstance %s is another record now (uid %s)", f.Record, ipi.UID)
	}
	pod, err := podOfRecord(ctx, k, ipi)
	if err != nil {
		return nil, err.Error()
	}
	s := ipamcheck.Snapshot{Records: []estuaryv1.IPInstance{*ipi}, Grace: grace}
	if pod != nil {
		s.Pods = []corev1.Pod{*pod}
	}
	if f.Kind == ipamcheck.TwoAddresses {
		// Listed after the pod, as check lists them.
		if s.Records, err = recordsOfPod(ctx, k, ipi.Spec.Binding); err != nil {
			return nil, err.Error()
		}
	}
	s.Taken = time.Now()
	_, group, ok := ipamcheck.Recheck(s, f)
	if !ok {
		return nil, noLonger(s, f)
	}
	if f.Kind == ipamcheck.TwoAddresses {
		return recheckTwo(f, group, pod)
	}
	if why := usedBy(ipi, pod); why != "" {
		return nil, why
	}
	if f.Kind == ipamcheck.Leaked {
		why, err := keptFor(ctx, k, ipi)
		if err != nil {
			return nil, err.Error()
		}
		if why != "" {
			return nil, "no longer leaked: " + why
		}
	}
	return ipi, ""
}

// recordsOfPod lists every record whose binding names the pod of b.
func recordsOfPod(ctx context.Context, k client.Client, b estuaryv1.Binding) ([]estuaryv1.IPInstance, error) {
	var all estuaryv1.IPInstanceList
	if err := k.List(ctx, &all); err != nil {
		return nil, fmt.Errorf("list ipinstances: %w", err)
	}
	var out []estuaryv1.IPInstance
	for _, ipi := range all.Items {
		if ipi.Spec.Binding.Namespace == b.Namespace && ipi.Spec.Binding.PodName == b.PodName {
			out = append(out, ipi)
		}
	}
	return out, nil
}

// noLonger says what check makes now of the record of a finding that no
// longer holds.
func noLonger(s ipamcheck.Snapshot, f ipamcheck.Finding) string {
	phase := "gone from the re-read"
	for i := range s.Records {
		if string(s.Records[i].UID) == f.RecordUID {
			phase = phaseOf(&s.Records[i])
		}
	}
	var now []string
	for _, g := range ipamcheck.Check(s).Findings {
		if g.RecordUID == f.RecordUID && g.Kind != f.Kind {
			now = append(now, string(g.Kind))
		}
	}
	what := "check finds nothing of the kind now"
	if len(now) > 0 {
		what = fmt.Sprintf("check finds it %v now", now)
	}
	if f.Kind == ipamcheck.TwoAddresses {
		return fmt.Sprintf("no longer %s: ipinstance %s is %s, and %s holds fewer than two Bound records of its family that check counts; %s",
			f.Kind, f.Record, phase, orDash(f.Pod), what)
	}
	return fmt.Sprintf("no longer %s: ipinstance %s is %s now; %s", f.Kind, f.Record, phase, what)
}

// recheckTwo returns the record of a TwoAddresses finding from group (the
// pod's records of its family that check counts, itself included) if the
// pod is the one the check saw and uses the address of another record of
// the group and not this one, or why not.
func recheckTwo(f ipamcheck.Finding, group []*estuaryv1.IPInstance, pod *corev1.Pod) (*estuaryv1.IPInstance, string) {
	if pod == nil || f.PodUID == "" || string(pod.UID) != f.PodUID {
		return nil, fmt.Sprintf("pod %s is not the pod the check saw (uid %q) now", orDash(f.Pod), f.PodUID)
	}
	uses := map[netip.Addr]bool{}
	for _, pip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(pip.IP); err == nil {
			uses[a] = true
		}
	}
	var self *estuaryv1.IPInstance
	usesOther := false
	for _, ipi := range group {
		p, err := netip.ParsePrefix(ipi.Spec.Address.IP)
		if err != nil {
			continue
		}
		if string(ipi.UID) == f.RecordUID {
			self = ipi
			if uses[p.Addr()] {
				return nil, fmt.Sprintf("pod %s uses this address", f.Pod)
			}
			continue
		}
		usesOther = usesOther || uses[p.Addr()]
	}
	switch {
	case self == nil:
		return nil, fmt.Sprintf("ipinstance %s is not among the pod's records now", f.Record)
	case len(pod.Status.PodIPs) == 0:
		return nil, fmt.Sprintf("pod %s reports no address yet; which one it uses is unknown", f.Pod)
	case !usesOther:
		return nil, fmt.Sprintf("pod %s uses none of its other records of this family (it reports %s); which one it should keep is unknown", f.Pod, podIPs(pod))
	}
	return self, ""
}

// podIPs lists a pod's reported addresses.
func podIPs(pod *corev1.Pod) string {
	ips := make([]string, len(pod.Status.PodIPs))
	for i, pip := range pod.Status.PodIPs {
		ips[i] = pip.IP
	}
	return strings.Join(ips, ", ")
}
