// Package scale is the driver of make scale: on a lab with one real node
// running estuary's daemon, it adds fake nodes run by kwok, creates pods
// in Deployments over the overlay and two underlay networks, churns a
// tenth of them, and measures the manager (allocation latency and rate,
// API requests per pod, cold start and memory), the webhook (latency as
// the API server sees it) and the real node's daemon (memory, data-path
// pass duration, kernel entries, VTEP to FDB latency).
package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/clientgates"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// Config is one scale run.
type Config struct {
	Kubeconfig        string
	Nodes             int // fake nodes
	Pods              int // pods of the first storm
	PodsPerDeployment int
	Namespace         string
	Kwok              string // the kwok binary (hack/kwok.sh)
	KwokStages        string // its stage configuration
	KwokLog           string
	NodeNetns         string // the real node's network namespace name
	NodeAddr          string // the real node's address: the manager's and daemon's (hostNetwork)
	ManagerMetrics    int
	ManagerHealth     int
	DaemonMetrics     int
	SystemNamespace   string // where estuary runs
	// ManagerQPS, when above 0, replaces the manager's API client rate
	// (--kube-client-qps, burst twice that) set by the chart (100, burst 200).
	ManagerQPS int
	// ManagerWorkers, when above 0, replaces the manager's --workers (pods
	// allocated in parallel; the chart's 16).
	ManagerWorkers int
	// ManagerMemory, when set, replaces the manager's memory limit (the
	// chart's 1Gi), so that a run can measure a footprint above it.
	ManagerMemory string
	// ManagerWatchList streams the manager's informers' initial state
	// (KUBE_FEATURE_WatchListClient=true in its container) instead of the
	// one list estuary's processes read by default.
	ManagerWatchList bool
	// Records, when above the IPInstances the storms leave, is topped up
	// with reservations before the manager's cold start.
	Records int
	// ProfileDir, when set, receives a CPU profile of kube-apiserver taken
	// during each large wave.
	ProfileDir string
	Timeout    time.Duration
	Out        io.Writer
}

// Chart and lab names the run relies on.
const (
	managerName = "estuary-manager"
	daemonName  = "estuary-daemon"
	metricsRole = "estuary-metrics-reader"
	workers     = 16
	probeNodes  = 3
)

// run holds the clients and state of one run.
type run struct {
	cfg  Config
	rest *rest.Config
	c    client.Client
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	tr   *tracker
	out  io.Writer
}

func (r *run) logf(format string, a ...any) {
	_, _ = fmt.Fprintf(r.out, "[scale %s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
}

// Run runs the whole measurement and prints its report to cfg.Out.
func Run(ctx context.Context, cfg Config) error {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	rc.QPS, rc.Burst = 500, 1000
	rc.UserAgent = "estuary-scale"
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme)); err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	r := &run{cfg: cfg, rest: rc, c: c, cs: cs, dyn: dyn, tr: newTracker(), out: cfg.Out}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	rep, err := r.measure(ctx)
	rep.print(cfg.Out, cfg)
	return err
}

// measure runs the phases in order; the report holds what was measured
// up to a failure.
func (r *run) measure(ctx context.Context) (*report, error) {
	rep := &report{started: time.Now()}
	if err := r.prepare(ctx); err != nil {
		return rep, err
	}
	kwok, err := r.startKwok(ctx)
	if err != nil {
		return rep, err
	}
	defer stopProcess(kwok)
	if err := r.tr.start(ctx, r.cs, r.dyn, r.cfg.Namespace); err != nil {
		return rep, err
	}
	t0 := time.Now()
	if err := createNodes(ctx, r.c, 0, r.cfg.Nodes, workers); err != nil {
		return rep, err
	}
	if err := r.waitFor(ctx, fmt.Sprintf("%d fake nodes Ready", r.cfg.Nodes), func() (bool, string, error) {
		n, err := readyFakeNodes(ctx, r.c)
		return n >= r.cfg.Nodes, fmt.Sprintf("%d Ready", n), err
	}); err != nil {
		return rep, err
	}
	rep.nodesReady = time.Since(t0)
	r.logf("%d fake nodes Ready in %s", r.cfg.Nodes, round(rep.nodesReady))

	if err := r.storms(ctx, rep); err != nil {
		return rep, err
	}
	if err := r.daemon(ctx, rep); err != nil {
		return rep, err
	}
	if err := r.topUp(ctx, rep); err != nil {
		return rep, err
	}
	if err := r.coldStart(ctx, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// prepare keeps estuary's own pods off the fake nodes (and sets the
// manager's API client rate when asked), and creates the namespace, the
// metrics token and the underlay networks.
func (r *run) prepare(ctx context.Context) error {
	aff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: fakeLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{fakeValue}}},
		}}},
	}}
	key := func(name string) client.ObjectKey {
		return client.ObjectKey{Namespace: r.cfg.SystemNamespace, Name: name}
	}
	var d appsv1.Deployment
	if err := r.c.Get(ctx, key(managerName), &d); err != nil {
		return fmt.Errorf("get deployment %s: %w", managerName, err)
	}
	d.Spec.Template.Spec.Affinity = aff
	for i := range d.Spec.Template.Spec.Containers {
		ct := &d.Spec.Template.Spec.Containers[i]
		if q := r.cfg.ManagerQPS; q > 0 {
			ct.Args = setFlag(setFlag(ct.Args, "--kube-client-qps", strconv.Itoa(q)), "--kube-client-burst", strconv.Itoa(2*q))
		}
		if m := r.cfg.ManagerMemory; m != "" {
			q, err := resource.ParseQuantity(m)
			if err != nil {
				return fmt.Errorf("manager memory %q: %w", m, err)
			}
			if ct.Resources.Limits == nil {
				ct.Resources.Limits = corev1.ResourceList{}
			}
			ct.Resources.Limits[corev1.ResourceMemory] = q
		}
		if r.cfg.ProfileDir != "" {
			ct.Args = setFlag(ct.Args, "--pprof-bind-address", managerPprof)
		}
		if r.cfg.ManagerWatchList {
			ct.Env = setEnv(ct.Env, clientgates.EnvWatchList, "true")
		}
		if w := r.cfg.ManagerWorkers; w > 0 {
			ct.Args = setFlag(ct.Args, "--workers", strconv.Itoa(w))
		}
	}
	if err := r.c.Update(ctx, &d); err != nil {
		return fmt.Errorf("update deployment %s: %w", managerName, err)
	}
	var ds appsv1.DaemonSet
	if err := r.c.Get(ctx, key(daemonName), &ds); err != nil {
		return fmt.Errorf("get daemonset %s: %w", daemonName, err)
	}
	ds.Spec.Template.Spec.Affinity = aff
	if r.cfg.ProfileDir != "" {
		for i := range ds.Spec.Template.Spec.Containers {
			ct := &ds.Spec.Template.Spec.Containers[i]
			if ct.Name == "daemon" {
				ct.Args = setFlag(ct.Args, "--pprof", "true")
			}
		}
	}
	if err := r.c.Update(ctx, &ds); err != nil {
		return fmt.Errorf("update daemonset %s: %w", daemonName, err)
	}
	if err := r.waitFor(ctx, "estuary rolled out off the fake nodes", func() (bool, string, error) {
		return r.rolledOut(ctx)
	}); err != nil {
		return err
	}
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", r.cfg.Namespace, err)
	}
	if err := testenv.BindClusterRole(ctx, r.c, metricsRole, r.cfg.Namespace, "scraper"); err != nil {
		return err
	}
	return createNetworks(ctx, r.c)
}

func (r *run) rolledOut(ctx context.Context) (bool, string, error) {
	ns := r.cfg.SystemNamespace
	var d appsv1.Deployment
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: managerName}, &d); err != nil {
		return false, "", fmt.Errorf("get deployment %s: %w", managerName, err)
	}
	var ds appsv1.DaemonSet
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: daemonName}, &ds); err != nil {
		return false, "", fmt.Errorf("get daemonset %s: %w", daemonName, err)
	}
	want := ptrOr(d.Spec.Replicas, 1)
	dOK := d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
	s := ds.Status
	dsOK := s.ObservedGeneration >= ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
		s.NumberAvailable == s.DesiredNumberScheduled && s.DesiredNumberScheduled > 0
	return dOK && dsOK, fmt.Sprintf("manager %d/%d updated and available, daemons %d/%d", d.Status.UpdatedReplicas, want, s.NumberAvailable, s.DesiredNumberScheduled), nil
}

// setFlag replaces the value of --name=... in args, or appends it.
func setFlag(args []string, name, value string) []string {
	for i, a := range args {
		if strings.HasPrefix(a, name+"=") {
			args[i] = name + "=" + value
			return args
		}
	}
	return append(args, name+"="+value)
}

// setEnv sets name to value in a container's environment, in place if it
// is there.
func setEnv(env []corev1.EnvVar, name, value string) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			env[i] = corev1.EnvVar{Name: name, Value: value}
			return env
		}
	}
	return append(env, corev1.EnvVar{Name: name, Value: value})
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// startKwok runs the kwok controller against the lab for the nodes that
// carry kwokAnnotation. Node leases last 120 s (renewed every 30 s, inside
// the node controller's 50 s grace period).
func (r *run) startKwok(ctx context.Context) (*exec.Cmd, error) {
	logf, err := os.Create(r.cfg.KwokLog)
	if err != nil {
		return nil, fmt.Errorf("kwok log: %w", err)
	}
	cmd := exec.Command(r.cfg.Kwok, //nolint:gosec // G204: the binary hack/kwok.sh built
		"--kubeconfig="+r.cfg.Kubeconfig, "--config="+r.cfg.KwokStages,
		"--manage-nodes-with-annotation-selector="+kwokAnnotation+"="+kwokValue,
		"--node-lease-duration-seconds=120", "--cidr="+fakePodCIDRs.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start kwok: %w", err)
	}
	go func() { _ = cmd.Wait(); _ = logf.Close() }()
	r.logf("kwok runs (pid %d, log %s)", cmd.Process.Pid, r.cfg.KwokLog)
	_ = ctx
	return cmd, nil
}

// stopProcess ends the process group of a command this run started.
func stopProcess(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for cmd.ProcessState == nil {
			time.Sleep(50 * time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// waitFor polls cond every 100 ms until it holds, logging its progress
// every 10 s; ctx bounds it.
func (r *run) waitFor(ctx context.Context, what string, cond func() (bool, string, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, start := time.Now(), time.Now()
	var state string
	for {
		ok, s, err := cond()
		if err == nil && ok {
			return nil
		}
		if err != nil {
			s = err.Error()
		}
		state = s
		if time.Since(last) > 10*time.Second {
			r.logf("waiting for %s (%s): %s", what, round(time.Since(start)), state)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not by the deadline, last %s: %w", what, state, ctx.Err())
		case <-tick.C:
		}
	}
}

// apiMetrics scrapes the API server's /metrics.
func (r *run) apiMetrics(ctx context.Context) (samples, error) {
	b, err := r.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	return parseMetrics(string(b)), nil
}

// estuaryMetrics scrapes the manager's or the daemon's /metrics at port
// on the real node, from the node's network namespace.
func (r *run) estuaryMetrics(ctx context.Context, port int) (samples, error) {
	u := fmt.Sprintf("https://%s:%d/metrics", r.cfg.NodeAddr, port)
	// A fresh token for every scrape: a run outlives the hour a token
	// lasts, and an expired one is answered with a 500.
	tok, err := testenv.ServiceAccountToken(ctx, r.c, r.cfg.Namespace, "scraper")
	if err != nil {
		return nil, err
	}
	code, body, err := get(ctx, nsClient("/var/run/netns/"+r.cfg.NodeNetns, 30*time.Second), u, tok)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET %s: status %d", u, code)
	}
	return parseMetrics(body), nil
}

// managerLease deletes the manager's leader Lease, so that a restarted
// manager takes the lead at once instead of waiting it out.
func (r *run) deleteManagerLease(ctx context.Context) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.cfg.SystemNamespace, Name: managerName}}
	if err := r.c.Delete(ctx, l); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete lease %s: %w", managerName, err)
	}
	return nil
}

func (r *run) leaseHolder(ctx context.Context) (string, error) {
	var l coordinationv1.Lease
	err := r.c.Get(ctx, client.ObjectKey{Namespace: r.cfg.SystemNamespace, Name: managerName}, &l)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get lease %s: %w", managerName, err)
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

// managerLogLine returns the last line of the manager's log holding s.
func (r *run) managerLogLine(ctx context.Context, s string) (string, error) {
	var pods corev1.PodList
	if err := r.c.List(ctx, &pods, client.InNamespace(r.cfg.SystemNamespace)); err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, managerName+"-") || p.DeletionTimestamp != nil {
			continue
		}
		b, err := r.cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptrTo[int64](2000)}).DoRaw(ctx)
		if err != nil {
			return "", fmt.Errorf("logs of %s: %w", p.Name, err)
		}
		var found string
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, s) {
				found = line
			}
		}
		return found, nil
	}
	return "", errors.New("no manager pod")
}

func ptrTo[T any](v T) *T { return &v }

// managerRestarts describes the restarts of the manager's containers: how
// many, and how the last one ended (OOMKilled, Error, ...).
func (r *run) managerRestarts(ctx context.Context) (string, error) {
	var pods corev1.PodList
	if err := r.c.List(ctx, &pods, client.InNamespace(r.cfg.SystemNamespace)); err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	var out []string
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, managerName+"-") {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			s := fmt.Sprintf("%s/%s: %d restarts", p.Name, cs.Name, cs.RestartCount)
			if t := cs.LastTerminationState.Terminated; t != nil {
				s += fmt.Sprintf(", the last ended %s (exit %d) at %s", t.Reason, t.ExitCode, t.FinishedAt.UTC().Format(time.RFC3339))
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, "; "), nil
}
