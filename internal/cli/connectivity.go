package cli

// connectivity-test deploys probe pods into a namespace of its own, checks
// each path of the plan (connectivity_plan.go) from inside the pods
// (connectivity_probe.go), prints one line per path and address family as
// each finishes, and deletes the namespace. A path is retried until it
// passes or --path-timeout passes, so a probe pod that just started, or a
// Service whose endpoints kube-proxy has not programmed yet, does not fail
// the test; the line says how many tries it took. A probe pod that never
// becomes Ready fails the paths that need it, with the reason, and the
// other paths still run.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// defaultProbeImage is the upstream agnhost image: netexec, curl and ping.
const defaultProbeImage = "registry.k8s.io/e2e-test-images/agnhost:2.63.0"

// connFlags are connectivity-test's options.
type connFlags struct {
	namespace, image, external, output string
	keep, skipPolicy                   bool
	readyTimeout, pathTimeout          time.Duration
	probeTimeout, cleanupTimeout       time.Duration
	interval                           time.Duration
}

func connectivityCmd(o *options) *cobra.Command {
	f := connFlags{interval: time.Second}
	c := &cobra.Command{
		Use:   "connectivity-test",
		Short: "Deploy probe pods and check every pod network path; exit 3 when one fails",
		Long: `connectivity-test creates a namespace, runs agnhost probe pods on two nodes and
checks, from inside the pods, each path a pod network must carry:

  pod-to-pod/same-node, pod-to-pod/across-nodes   both ways; the peer must see the client's own address
  pod-to-service                                  a ClusterIP Service whose backend is on the other node
  node-to-pod/across-nodes, node-to-pod/same-node a host-network pod reaches pods
  pod-to-external                                 --external-target host:port (TCP) or an address (ICMP)
  overlay-to-underlay, underlay-to-overlay        for each Underlay network with a free address and a
                                                  usable node, a probe on it; no NAT either way
  retained-address                                a StatefulSet's pod re-created on the other node gets
                                                  its address back and is reached
  policy/deny-ingress, policy/allow-ingress       a default-deny ingress NetworkPolicy on a pod of the
                                                  other node drops the client, a second one admits the
                                                  client only (--skip-policy leaves them out)

TCP probes report the handshake time curl measured in the pod, ICMP probes the
average echo round trip. One line per path and address family: OK, FAIL with the
reason, or SKIP with why the path does not apply. The namespace is deleted at the
end (and waited for) unless --keep. It needs create on namespaces, pods, pods/exec,
services, statefulsets and networkpolicies, and patch on statefulsets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return runConnectivity(cmd.Context(), o, &f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.namespace, "test-namespace", connName, "namespace the test creates and deletes")
	fl.StringVar(&f.image, "image", defaultProbeImage, "probe image: agnhost (netexec, pause), with sh, curl and ping")
	fl.StringVar(&f.external, "external-target", "", "outside the cluster: host:port to connect to, or an address to ping; empty skips the path")
	fl.BoolVar(&f.keep, "keep", false, "leave the namespace and its probes after the test")
	fl.BoolVar(&f.skipPolicy, "skip-policy", false, "do not check that NetworkPolicy is enforced (no NetworkPolicies are created)")
	fl.StringVarP(&f.output, "output", "o", "text", reportFormats)
	fl.DurationVar(&f.readyTimeout, "ready-timeout", 3*time.Minute, "how long the probe pods may take to be Ready, and the re-created StatefulSet pod")
	fl.DurationVar(&f.pathTimeout, "path-timeout", 30*time.Second, "how long one path is retried before it fails")
	fl.DurationVar(&f.probeTimeout, "probe-timeout", 5*time.Second, "how long one curl or ping may wait for an answer")
	fl.DurationVar(&f.cleanupTimeout, "cleanup-timeout", 3*time.Minute, "how long to wait for the namespace to be gone")
	return c
}

func (f *connFlags) validate() error {
	if err := checkReportFormat("connectivity-test", f.output); err != nil {
		return err
	}
	if f.external != "" && !isAddress(f.external) {
		host, port, err := net.SplitHostPort(f.external)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("connectivity-test: --external-target %q: want host:port or an IP address", f.external)
		}
	}
	for name, d := range map[string]time.Duration{"ready-timeout": f.readyTimeout, "path-timeout": f.pathTimeout,
		"probe-timeout": f.probeTimeout, "cleanup-timeout": f.cleanupTimeout} {
		if d <= 0 {
			return fmt.Errorf("connectivity-test: --%s must be positive, not %s", name, d)
		}
	}
	return nil
}

// connResult is one path's outcome, for one address family.
type connResult struct {
	Path       string   `json:"path"`
	Status     string   `json:"status"` // OK, FAIL or SKIP
	From       string   `json:"from,omitempty"`
	To         string   `json:"to,omitempty"`
	Family     string   `json:"family,omitempty"`
	TCPMillis  *float64 `json:"tcpMillis,omitempty"`
	ICMPMillis *float64 `json:"icmpMillis,omitempty"`
	Attempts   int      `json:"attempts,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

// Result statuses.
const (
	statusOK   = "OK"
	statusFail = "FAIL"
	statusSkip = "SKIP"
)

// connReport is connectivity-test's -o json and yaml output.
type connReport struct {
	Namespace string       `json:"namespace"`
	Image     string       `json:"image"`
	Nodes     []string     `json:"nodes"`
	Results   []connResult `json:"results"`
	OK        int          `json:"ok"`
	Failed    int          `json:"failed"`
	Skipped   int          `json:"skipped"`
}

// connRun is one connectivity test.
type connRun struct {
	k        client.Client
	exec     podExecFunc
	f        *connFlags
	s        Streams
	plan     connPlan
	ready    map[string]*corev1.Pod
	notReady map[string]string
	svc      *corev1.Service
	report   connReport
	// policy is the policy step in place; policyErr why the next could
	// not be put in place.
	policy    policyStep
	policyErr error
}

func runConnectivity(ctx context.Context, o *options, f *connFlags) error {
	k, err := o.newClient()
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	run, err := newPodExec(cfg)
	if err != nil {
		return err
	}
	in, err := readPlanInput(ctx, k, f)
	if err != nil {
		return fmt.Errorf("connectivity-test: %w", err)
	}
	p, err := makePlan(in)
	if err != nil {
		return fmt.Errorf("connectivity-test: %w", err)
	}
	r := &connRun{k: k, exec: run, f: f, s: o.streams, plan: p}
	return r.run(ctx)
}

// readPlanInput reads the nodes, Networks and Subnets the plan is made of.
func readPlanInput(ctx context.Context, k client.Client, f *connFlags) (planInput, error) {
	in := planInput{Namespace: f.namespace, External: f.external, SkipPolicy: f.skipPolicy}
	var nodes corev1.NodeList
	if err := k.List(ctx, &nodes); err != nil {
		return in, fmt.Errorf("list nodes: %w", err)
	}
	in.Nodes = nodes.Items
	var nws estuaryv1.NetworkList
	var sns estuaryv1.SubnetList
	if err := k.List(ctx, &nws); err != nil {
		in.NetworksErr = err
		return in, nil
	}
	if err := k.List(ctx, &sns); err != nil {
		in.NetworksErr = err
		return in, nil
	}
	in.Networks, in.Subnets = nws.Items, sns.Items
	return in, nil
}

// note writes a progress line to stderr.
func (r *connRun) note(format string, args ...any) { _ = say(r.s.Err, format, args...) }

func (r *connRun) run(ctx context.Context) (err error) {
	p := r.plan
	r.report = connReport{Namespace: p.Namespace, Image: r.f.image, Nodes: []string{p.NodeA}}
	if p.NodeB != p.NodeA {
		r.report.Nodes = append(r.report.Nodes, p.NodeB)
	}
	r.note("connectivity test in namespace %s on %s (of %d usable nodes), image %s", p.Namespace,
		strings.Join(r.report.Nodes, " and "), p.Usable, r.f.image)
	for _, u := range p.Underlays {
		r.note("underlay network %s (subnet %s has free addresses): probe %s on %s", u.Network, u.Subnet, u.Pod, u.Node)
	}
	if err := prepareNamespace(ctx, r.k, p.Namespace, r.f.cleanupTimeout, r.note); err != nil {
		return fmt.Errorf("connectivity-test: %w", err)
	}
	if r.f.keep {
		defer r.note("namespace %s kept (--keep); kubectl delete namespace %s removes it", p.Namespace, p.Namespace)
	} else {
		defer func() { err = errors.Join(err, r.cleanup()) }()
	}
	start := time.Now()
	if err := createProbes(ctx, r.k, p, r.f.image); err != nil {
		return fmt.Errorf("connectivity-test: %w", err)
	}
	if r.ready, r.notReady, err = waitProbes(ctx, r.k, p, r.f.readyTimeout); err != nil {
		return fmt.Errorf("connectivity-test: %w", err)
	}
	r.note("%d of %d probe pods Ready in %.1fs", len(r.ready), len(r.ready)+len(r.notReady), time.Since(start).Seconds())
	r.svc = &corev1.Service{}
	if err := r.k.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: probeService}, r.svc); err != nil {
		return fmt.Errorf("connectivity-test: read service %s/%s: %w", p.Namespace, probeService, err)
	}
	for _, path := range p.Paths {
		for _, res := range r.check(ctx, path) {
			if err := r.add(res); err != nil {
				return err
			}
		}
	}
	return r.finish()
}

// add records a result and prints its line.
func (r *connRun) add(res connResult) error {
	r.report.Results = append(r.report.Results, res)
	switch res.Status {
	case statusOK:
		r.report.OK++
	case statusFail:
		r.report.Failed++
	default:
		r.report.Skipped++
	}
	if r.f.output != "text" {
		return nil
	}
	return say(r.s.Out, "%s", resultLine(res))
}

// resultLine is a result as one line of text.
func resultLine(res connResult) string {
	line := fmt.Sprintf("%-4s  %-24s  ", res.Status, res.Path)
	if res.From != "" || res.To != "" {
		line += res.From + " -> " + res.To + ": "
	}
	if res.Status != statusOK {
		return line + res.Reason + tries(res.Attempts)
	}
	var m []string
	if res.TCPMillis != nil {
		m = append(m, fmt.Sprintf("tcp %.2fms", *res.TCPMillis))
	}
	if res.ICMPMillis != nil {
		m = append(m, fmt.Sprintf("icmp %.2fms", *res.ICMPMillis))
	}
	if res.Reason != "" {
		m = append(m, res.Reason)
	}
	return line + strings.Join(m, ", ") + tries(res.Attempts)
}

func tries(n int) string {
	if n > 1 {
		return fmt.Sprintf(" (%d tries)", n)
	}
	return ""
}

// finish prints the summary, or the report, and fails when a path did.
func (r *connRun) finish() error {
	if r.f.output != "text" {
		if err := report(r.s.Out, r.f.output, r.report); err != nil {
			return err
		}
	} else if err := say(r.s.Out, "%d paths: %d OK, %d failed, %d skipped", len(r.report.Results),
		r.report.OK, r.report.Failed, r.report.Skipped); err != nil {
		return err
	}
	if r.report.Failed > 0 {
		return fmt.Errorf("connectivity-test: %d of %d paths failed: %w", r.report.Failed, len(r.report.Results), ErrProblems)
	}
	return nil
}

// cleanup deletes the namespace and waits for it, even when the test was
// interrupted.
func (r *connRun) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.f.cleanupTimeout+30*time.Second)
	defer cancel()
	start := time.Now()
	r.note("deleting namespace %s", r.plan.Namespace)
	if err := deleteNamespace(ctx, r.k, r.plan.Namespace, r.f.cleanupTimeout); err != nil {
		return fmt.Errorf("connectivity-test: clean up: %w", err)
	}
	r.note("namespace %s deleted in %.1fs", r.plan.Namespace, time.Since(start).Seconds())
	return nil
}

// check runs one path of the plan: one result per address family both
// ends have, or one result saying why it did not run.
func (r *connRun) check(ctx context.Context, path probePath) []connResult {
	base := connResult{Path: path.Kind}
	if path.Skip != "" {
		base.Status, base.Reason = statusSkip, path.Skip
		return []connResult{base}
	}
	src, why := r.pod(path.From)
	if src == nil {
		base.Status, base.From, base.To, base.Reason = statusFail, path.From, toName(path), why
		return []connResult{base}
	}
	base.From = describe(src)
	switch {
	case path.External != "":
		return []connResult{r.probe(ctx, base, src, externalTarget(path))}
	case path.Kind == pathRetained:
		return r.retained(ctx, base, src, path)
	case path.Service:
		return r.service(ctx, base, src)
	case path.Policy != policyNone:
		return r.policyPath(ctx, base, src, path)
	}
	dst, why := r.pod(path.To)
	if dst == nil {
		base.Status, base.To, base.Reason = statusFail, path.To, why
		return []connResult{base}
	}
	return r.toPod(ctx, base, src, dst, path)
}

// toName is what a path reaches, by name.
func toName(path probePath) string {
	switch {
	case path.External != "":
		return path.External
	case path.Service:
		return "service " + probeService
	}
	return path.To
}

// pod is the Ready probe pod called name, or why there is none.
func (r *connRun) pod(name string) (*corev1.Pod, string) {
	if p := r.ready[name]; p != nil {
		return p, ""
	}
	if why, ok := r.notReady[name]; ok {
		return nil, fmt.Sprintf("pod %s %s", name, why)
	}
	return nil, fmt.Sprintf("pod %s is not part of the test", name)
}

// describe is "name (node, addresses)".
func describe(p *corev1.Pod) string {
	return fmt.Sprintf("%s (%s, %s)", p.Name, p.Spec.NodeName, podIPs(p))
}

// toPod probes dst from src once per address family both have.
func (r *connRun) toPod(ctx context.Context, base connResult, src, dst *corev1.Pod, path probePath) []connResult {
	var out []connResult
	for _, fam := range commonFamilies(src, dst) {
		res := base
		res.Family = fam
		dstIP := addrOf(dst, fam)
		res.To = fmt.Sprintf("%s (%s, %s)", dst.Name, dst.Spec.NodeName, dstIP)
		t := target{Host: dstIP, Port: netexecPort, Expect: path.Expect, ICMP: path.ICMP}
		switch path.Expect {
		case expectClientIP:
			t.URL, t.Want = "/clientip", []string{addrOf(src, fam)}
		default:
			t.URL, t.Want = "/hostname", []string{dst.Name}
		}
		out = append(out, r.probe(ctx, res, src, t))
	}
	if len(out) == 0 {
		res := base
		res.Status, res.To = statusSkip, describe(dst)
		res.Reason = "no address family in common"
		out = append(out, res)
	}
	return out
}

// service probes the Service's ClusterIP of each family the client has.
func (r *connRun) service(ctx context.Context, base connResult, src *corev1.Pod) []connResult {
	var out []connResult
	for _, ip := range serviceIPs(r.svc) {
		fam := familyOf(ip)
		if addrOf(src, fam) == "" {
			continue
		}
		res := base
		res.Family = fam
		res.To = fmt.Sprintf("service %s %s (backend %s)", r.svc.Name, net.JoinHostPort(ip, strconv.Itoa(servicePort)), probeOther)
		t := target{Host: ip, Port: servicePort, URL: "/hostname", Expect: expectHostname, Want: []string{probeOther}}
		out = append(out, r.probe(ctx, res, src, t))
	}
	if len(out) == 0 {
		res := base
		res.Status, res.To, res.Reason = statusFail, "service "+r.svc.Name, "the Service has no ClusterIP of the client's families"
		out = append(out, res)
	}
	return out
}

func serviceIPs(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return []string{svc.Spec.ClusterIP}
	}
	return nil
}

// externalTarget is the probe of --external-target.
func externalTarget(path probePath) target {
	if path.Expect == expectICMP {
		return target{Host: path.External, Expect: expectICMP, ICMP: true}
	}
	host, port, _ := net.SplitHostPort(path.External) // validated with the flags
	n, _ := strconv.Atoi(port)
	return target{Host: host, Port: n, Expect: expectConnect}
}

// probe runs t from src until it passes or the path's time is up.
func (r *connRun) probe(ctx context.Context, res connResult, src *corev1.Pod, t target) connResult {
	if res.To == "" {
		res.To = t.Host
		if t.Port != 0 {
			res.To = net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
		}
		if isAddress(t.Host) {
			res.Family = familyOf(t.Host)
		}
	}
	m, attempts, err := probeUntil(ctx, r.exec, src, t, r.f.probeTimeout, r.f.pathTimeout, r.f.interval)
	res.Attempts = attempts
	if err != nil {
		res.Status, res.Reason = statusFail, err.Error()
		return res
	}
	res.Status = statusOK
	res.TCPMillis, res.ICMPMillis = millis(m.TCP), millis(m.ICMP)
	if m.Denied != "" {
		res.Reason = "denied: " + m.Denied
	}
	return res
}

func millis(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	ms := float64(*d) / float64(time.Millisecond)
	return &ms
}

// retained re-creates the StatefulSet's pod on the plan's other node and
// probes it from src when it came back with the same addresses.
func (r *connRun) retained(ctx context.Context, base connResult, src *corev1.Pod, path probePath) []connResult {
	before, why := r.pod(retainPod)
	if before == nil {
		base.Status, base.To, base.Reason = statusFail, retainPod, why
		return []connResult{base}
	}
	r.note("re-creating pod %s (%s, %s) on %s", retainPod, before.Spec.NodeName, podIPs(before), r.plan.RetainTo)
	after, err := recreateRetained(ctx, r.k, r.plan.Namespace, r.plan.RetainTo, before, r.f.readyTimeout)
	if err != nil {
		base.Status, base.To, base.Reason = statusFail, describe(before), err.Error()
		return []connResult{base}
	}
	if had, got := sortedIPs(before), sortedIPs(after); !slices.Equal(had, got) {
		base.Status, base.To = statusFail, describe(after)
		base.Reason = fmt.Sprintf("re-created with %s, had %s on %s", strings.Join(got, ", "), strings.Join(had, ", "), before.Spec.NodeName)
		return []connResult{base}
	}
	out := r.toPod(ctx, base, src, after, path)
	for i := range out {
		out[i].To = fmt.Sprintf("%s (%s -> %s, %s)", after.Name, before.Spec.NodeName, after.Spec.NodeName, addrOf(after, out[i].Family))
		if out[i].Status == statusOK {
			out[i].Reason = "address kept"
		}
	}
	return out
}

func sortedIPs(p *corev1.Pod) []string {
	var ips []string
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	slices.Sort(ips)
	return ips
}

// familyOf is "IPv4" or "IPv6" for an address (an IPv4-mapped one is
// IPv4), "" for anything else.
func familyOf(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	return string(family.Of(a.Unmap()))
}

// addrOf is p's address of family fam, or "".
func addrOf(p *corev1.Pod, fam string) string {
	for _, ip := range p.Status.PodIPs {
		if familyOf(ip.IP) == fam {
			return ip.IP
		}
	}
	return ""
}

// commonFamilies are the families both pods have addresses of, IPv4 first.
func commonFamilies(a, b *corev1.Pod) []string {
	var out []string
	for _, fam := range []string{estuaryv1.IPFamilyIPv4, estuaryv1.IPFamilyIPv6} {
		if addrOf(a, fam) != "" && addrOf(b, fam) != "" {
			out = append(out, fam)
		}
	}
	return out
}
