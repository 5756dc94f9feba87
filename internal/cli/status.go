package cli

// `kubectl estuary status`: is estuary healthy?
//
// It answers from a fixed number of reads, whatever the cluster's size: the
// manager's Deployment, its leader Lease, the webhook's configurations,
// Service endpoints and certificate Secret, the daemon's DaemonSet and
// pods, every Node's metadata, and the Subnets and Networks. What a node's
// daemon set up (its conflist, its fast path) and its BGP sessions come
// from the annotations that daemon publishes on its own Node
// (networking.estuary.io/daemon-status and networking.estuary.io/bgp-peers),
// never from exec into a thousand pods.
//
// Where things are comes from the install itself: the manager Deployment
// is found by its chart label (in --estuary-namespace, else -n, else in
// every namespace), and the Lease's namespace, the webhook's Service,
// Secret and configurations are read from its container's flags, so a
// renamed or moved install is still judged by what it runs with.
//
// Each check is one line at one level: ok, warning (degraded, not broken:
// a refused fast path, a certificate the rotator should have renewed) or
// problem. Any problem makes the command fail (exit 3, as check), with an
// error naming every problem; --wait polls until there is none or the
// timeout passes.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Levels of a StatusCheck.
const (
	LevelOK      = "ok"
	LevelWarning = "warning"
	LevelProblem = "problem"
)

// StatusReport is what `kubectl estuary status` prints.
type StatusReport struct {
	// Namespace is the namespace estuary is installed in.
	Namespace string        `json:"namespace"`
	Checks    []StatusCheck `json:"checks"`
	Problems  int           `json:"problems"`
	Warnings  int           `json:"warnings"`
}

// StatusCheck is one line of the report: one object and what was found.
type StatusCheck struct {
	// Check is what is checked: manager, leader, webhook, certificate,
	// daemon, node, subnet or network.
	Check string `json:"check"`
	// Object names what the line is about ("Deployment kube-system/estuary-manager", "node-1").
	Object string `json:"object"`
	// Level is ok, warning or problem.
	Level string `json:"level"`
	// Message says what was found, problems first, then warnings.
	Message string `json:"message"`
	// Problems and Warnings list each problem and warning on its own.
	Problems []string `json:"problems,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Defaults of status's flags.
const (
	defaultSubnetThreshold = 90
	defaultCertWarn        = 30 * 24 * time.Hour
	defaultCertCritical    = 7 * 24 * time.Hour
	defaultWait            = 5 * time.Minute
	statusPoll             = 2 * time.Second
)

// statusFlags are status's options.
type statusFlags struct {
	output          string
	namespace       string
	wait            time.Duration
	subnetThreshold float64
	certWarn        time.Duration
	certCritical    time.Duration
	now             func() time.Time // tests fix the clock
}

func statusCmd(o *options) *cobra.Command {
	f := statusFlags{now: time.Now}
	c := &cobra.Command{
		Use:   "status",
		Short: "Is estuary healthy? One line per check; exit 3 when anything is wrong",
		Long: `status checks, from a fixed number of API reads whatever the cluster's size:
  manager      the manager Deployment's replicas are ready
  leader       its leader Lease is held and renewed (stale after twice its duration)
  webhook      the webhook Service has a ready endpoint, and both webhook configurations
               have a caBundle that verifies the serving certificate in its Secret
  certificate  that certificate's expiry: a problem when expired or under --cert-critical,
               a warning under --cert-warn (the rotator renews 90 days ahead)
  daemon       the daemon DaemonSet
  node         every node its nodeSelector selects runs a Ready estuary-daemon pod whose
               conflist is installed (and read first by the runtime); the fast path is
               loaded, off, or refused (a warning, with the kernel's reason); every BGP
               session the node's daemon publishes is Established
  subnet       no subnet is used at or above --subnet-threshold percent
  network      no Network or Subnet condition is False (BGPPeersEstablished, Ready)
Any problem ends the command with exit status 3 and an error naming each one.
--wait polls until there is none or the timeout passes (--wait alone: 5m).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkReportFormat("status", f.output); err != nil {
				return err
			}
			if f.subnetThreshold <= 0 || f.subnetThreshold > 100 {
				return fmt.Errorf("status: --subnet-threshold=%v: want a percentage above 0, at most 100", f.subnetThreshold)
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			if f.namespace == "" && o.flags != nil && o.flags.Namespace != nil {
				f.namespace = *o.flags.Namespace
			}
			return runStatus(cmd.Context(), k, o.streams, f)
		},
	}
	c.Flags().StringVarP(&f.output, "output", "o", "text", reportFormats)
	c.Flags().StringVar(&f.namespace, "estuary-namespace", "", "namespace estuary is installed in (default: -n, else found by the manager's label)")
	c.Flags().DurationVar(&f.wait, "wait", 0, "poll until there is no problem, at most this long (--wait alone: 5m)")
	c.Flags().Lookup("wait").NoOptDefVal = defaultWait.String()
	c.Flags().Float64Var(&f.subnetThreshold, "subnet-threshold", defaultSubnetThreshold, "percentage of a subnet's addresses in use at which it is a problem")
	c.Flags().DurationVar(&f.certWarn, "cert-warn", defaultCertWarn, "warn when the webhook's serving certificate expires within this")
	c.Flags().DurationVar(&f.certCritical, "cert-critical", defaultCertCritical, "a problem when the webhook's serving certificate expires within this")
	return c
}

// runStatus builds the report (until it is clean or the wait is over) and
// prints it.
func runStatus(ctx context.Context, k client.Reader, s Streams, f statusFlags) error {
	deadline := f.now().Add(f.wait)
	var last []string
	for {
		r, err := buildStatus(ctx, k, f)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		problems := r.problemLines()
		if len(problems) == 0 || f.wait <= 0 || !f.now().Before(deadline) {
			if err := printStatus(s, r, f.output); err != nil {
				return err
			}
			if len(problems) > 0 {
				return fmt.Errorf("status: %s (%w): %s", plural(len(problems), "problem"), ErrProblems, strings.Join(problems, "; "))
			}
			return nil
		}
		if !slices.Equal(problems, last) {
			if err := say(s.Err, "waiting (%s): %s", plural(len(problems), "problem"), strings.Join(problems, "; ")); err != nil {
				return err
			}
			last = problems
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("status: %w", ctx.Err())
		case <-time.After(statusPoll):
		}
	}
}

// buildStatus runs every check once.
func buildStatus(ctx context.Context, k client.Reader, f statusFlags) (StatusReport, error) {
	ns, dep, err := findManager(ctx, k, f.namespace)
	if err != nil {
		return StatusReport{}, err
	}
	r := StatusReport{Namespace: ns}
	now := f.now()
	r.add(managerChecks(ctx, k, ns, dep, now)...)
	r.add(webhookChecks(ctx, k, ns, dep, now, f)...)
	nodeChecks, err := daemonChecks(ctx, k, ns)
	if err != nil {
		return StatusReport{}, err
	}
	r.add(nodeChecks...)
	ipChecks, err := addressChecks(ctx, k, f.subnetThreshold)
	if err != nil {
		return StatusReport{}, err
	}
	r.add(ipChecks...)
	return r, nil
}

// findManager finds the namespace estuary is installed in and its manager
// Deployment (nil when there is none: a problem the manager check names).
// Without a namespace it looks in every namespace, and falls back to the
// chart's default namespace when the user may not list them all.
func findManager(ctx context.Context, k client.Reader, ns string) (string, *appsv1.Deployment, error) {
	opts := []client.ListOption{client.MatchingLabels{nameLabel: "estuary-manager"}}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	var deps appsv1.DeploymentList
	err := k.List(ctx, &deps, opts...)
	if apierrors.IsForbidden(err) && ns == "" {
		ns = defaultDaemonNamespace
		err = k.List(ctx, &deps, append(opts, client.InNamespace(ns))...)
	}
	if err != nil {
		return "", nil, fmt.Errorf("find the estuary manager Deployment (label %s=estuary-manager): %w", nameLabel, err)
	}
	switch len(deps.Items) {
	case 0:
		if ns == "" {
			ns = defaultDaemonNamespace
		}
		return ns, nil, nil
	case 1:
		return deps.Items[0].Namespace, &deps.Items[0], nil
	}
	var where []string
	for _, d := range deps.Items {
		where = append(where, d.Namespace+"/"+d.Name)
	}
	return "", nil, fmt.Errorf("several estuary managers (%s): name one namespace with --estuary-namespace", strings.Join(where, ", "))
}

// add appends checks, counting their levels.
func (r *StatusReport) add(checks ...StatusCheck) {
	for _, c := range checks {
		switch c.Level {
		case LevelProblem:
			r.Problems++
		case LevelWarning:
			r.Warnings++
		}
		r.Checks = append(r.Checks, c)
	}
}

// problemLines names every problem, with its object.
func (r *StatusReport) problemLines() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Level == LevelProblem {
			out = append(out, c.Object+": "+strings.Join(c.Problems, "; "))
		}
	}
	return out
}

func printStatus(s Streams, r StatusReport, output string) error {
	if output != "text" {
		return report(s.Out, output, r)
	}
	t := newTable()
	t.row("STATUS\tCHECK\tOBJECT\tDETAILS\n")
	for _, c := range r.Checks {
		t.row("%s\t%s\t%s\t%s\n", strings.ToUpper(c.Level), c.Check, c.Object, c.Message)
	}
	if err := t.writeTo(s.Out); err != nil {
		return err
	}
	checks := plural(len(r.Checks), "check")
	switch {
	case r.Problems > 0:
		return say(s.Out, "estuary in %s: %s, %s in %s", r.Namespace, plural(r.Problems, "problem"), plural(r.Warnings, "warning"), checks)
	case r.Warnings > 0:
		return say(s.Out, "estuary in %s is healthy: %s, %s", r.Namespace, checks, plural(r.Warnings, "warning"))
	}
	return say(s.Out, "estuary in %s is healthy: %s", r.Namespace, checks)
}

// checkBuilder collects a check's facts and problems into one line.
type checkBuilder struct {
	check, object string
	facts         []string
	problems      []string
	warnings      []string
}

func newCheck(check, object string) *checkBuilder {
	return &checkBuilder{check: check, object: object}
}

func (b *checkBuilder) fact(format string, args ...any) {
	b.facts = append(b.facts, fmt.Sprintf(format, args...))
}
func (b *checkBuilder) problem(format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}
func (b *checkBuilder) warn(format string, args ...any) {
	b.warnings = append(b.warnings, fmt.Sprintf(format, args...))
}

// done is the check: problems first, then warnings, then facts.
func (b *checkBuilder) done() StatusCheck {
	c := StatusCheck{Check: b.check, Object: b.object, Level: LevelOK}
	switch {
	case len(b.problems) > 0:
		c.Level = LevelProblem
	case len(b.warnings) > 0:
		c.Level = LevelWarning
	}
	c.Problems, c.Warnings = b.problems, b.warnings
	c.Message = strings.Join(slices.Concat(b.problems, b.warnings, b.facts), "; ")
	return c
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
