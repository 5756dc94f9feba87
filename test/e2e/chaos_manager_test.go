//go:build lab

package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager of the chaos suite loses the answers to some of its
// IPInstance writes after the API server stored them
// (--fault-lose-answers, internal/faultinject).
const (
	managerCtr      = "manager"
	loseAnswersFlag = "--fault-lose-answers"
	faultOnLine     = "fault injection: the answers to some IPInstance writes will be lost"
	lostAnswerLine  = "injected fault"
	// logLevelFlag at debug makes the manager log every address it
	// allocates, hands over, keeps and releases, for failure messages.
	logLevelFlag       = "--zap-log-level"
	managerRolloutTime = 5 * time.Minute
)

// loseManagerAnswers runs the manager with --fault-lose-answers=every until
// the test ends: it adds the flag to the manager Deployment's container,
// waits until every manager pod runs with it, and follows the logs of
// every manager pod from then on. When the test ends the Deployment gets
// its own arguments back and the test waits for that rollout, so later
// tests see the manager as installed.
func (e *labEnv) loseManagerAnswers(t *testing.T, ns string, every int) *managerLogs {
	t.Helper()
	var orig []string
	e.setManagerArgs(t, func(args []string) []string {
		orig = withoutFlag(args, loseAnswersFlag)
		return append(withoutFlag(orig, logLevelFlag), fmt.Sprintf("%s=%d", loseAnswersFlag, every), logLevelFlag+"=debug")
	})
	t.Cleanup(func() {
		e.setManagerArgs(t, func([]string) []string { return orig })
	})
	logs, err := e.followManagerLogs(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(logs.finish)
	return logs
}

// withoutFlag is args without any occurrence of flag (as "flag" or "flag=value").
func withoutFlag(args []string, flag string) []string {
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") })
}

// setManagerArgs replaces the manager container's arguments with what
// change makes of them and waits until the Deployment has rolled out: every
// live manager pod runs with the new arguments and is Ready.
func (e *labEnv) setManagerArgs(t *testing.T, change func([]string) []string) {
	t.Helper()
	var want []string
	err := waitFor("manager Deployment updated", time.Minute, func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerDeploy}, &d); err != nil {
			return err
		}
		c := managerContainer(&d.Spec.Template.Spec)
		if c == nil {
			return fmt.Errorf("deployment %s has no container %s", managerDeploy, managerCtr)
		}
		want = change(slices.Clone(c.Args))
		c.Args = slices.Clone(want)
		return e.c.Update(ctx, &d)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = waitFor(fmt.Sprintf("manager rolled out with args %v", want), managerRolloutTime, func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerDeploy}, &d); err != nil {
			return err
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != replicas || s.Replicas != replicas || s.AvailableReplicas != replicas {
			return fmt.Errorf("generation %d observed %d; %d replicas, %d updated, %d available, want %d", d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, replicas)
		}
		pods, err := e.systemPods(ctx, managerName, "")
		if err != nil {
			return err
		}
		for i := range pods {
			p := &pods[i]
			if c := managerContainer(&p.Spec); c == nil || !slices.Equal(c.Args, want) {
				return fmt.Errorf("manager pod %s still runs with other arguments", p.Name)
			}
			if !podReady(p) {
				return fmt.Errorf("manager pod %s: %s", p.Name, describePod(p))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func managerContainer(s *corev1.PodSpec) *corev1.Container {
	for i := range s.Containers {
		if s.Containers[i].Name == managerCtr {
			return &s.Containers[i]
		}
	}
	return nil
}

// managerLogs follows the log of every manager pod, from its first line,
// and keeps the lines that say fault injection is on, those that name an
// injected fault (a write whose answer was lost), and those that name the
// test's namespace, for failure messages. A stream cut short
// (the API server restarted) is followed again from the start; lines are
// told apart by pod and timestamp, so none is counted twice.
type managerLogs struct {
	e      *labEnv
	cs     kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu        sync.Mutex
	following map[types.UID]bool
	faultOn   map[types.UID]bool
	lost      map[string]bool // pod UID and timestamped line
	ns        string
	nsLines   map[string]bool // timestamped lines naming ns
}

func (e *labEnv) followManagerLogs(ns string) (*managerLogs, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", e.kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &managerLogs{e: e, cs: cs, cancel: cancel, done: make(chan struct{}),
		following: map[types.UID]bool{}, faultOn: map[types.UID]bool{}, lost: map[string]bool{}, ns: ns, nsLines: map[string]bool{}}
	go l.run(ctx)
	return l, nil
}

// run looks every 2 s for manager pods whose container runs and whose log
// nobody follows, and follows each until its stream ends.
func (l *managerLogs) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() { wg.Wait(); close(l.done) }()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		pods, _ := l.e.systemPods(lctx, managerName, "")
		cancel()
		for i := range pods {
			p := pods[i]
			if !containerRunning(&p, managerCtr) {
				continue
			}
			l.mu.Lock()
			start := !l.following[p.UID]
			l.following[p.UID] = true
			l.mu.Unlock()
			if start {
				wg.Go(func() { l.follow(ctx, &p) })
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func containerRunning(p *corev1.Pod, name string) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == name {
			return c.State.Running != nil
		}
	}
	return false
}

func (l *managerLogs) follow(ctx context.Context, p *corev1.Pod) {
	defer func() {
		l.mu.Lock()
		l.following[p.UID] = false
		l.mu.Unlock()
	}()
	opts := &corev1.PodLogOptions{Container: managerCtr, Follow: true, Timestamps: true}
	rc, err := l.cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
	if err != nil {
		return
	}
	defer func() { _ = rc.Close() }()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		l.save(p, line)
		if strings.Contains(line, `"`+l.ns+`"`) || strings.Contains(line, l.ns+"/") {
			l.mu.Lock()
			l.nsLines[line] = true
			l.mu.Unlock()
		}
		switch {
		case strings.Contains(line, faultOnLine):
			l.mu.Lock()
			l.faultOn[p.UID] = true
			l.mu.Unlock()
		case strings.Contains(line, lostAnswerLine):
			l.mu.Lock()
			l.lost[string(p.UID)+" "+line] = true
			l.mu.Unlock()
		}
	}
}

// save appends line, from manager pod p, to the file ESTUARY_CHAOS_MANAGER_LOG
// names, if it names one.
func (l *managerLogs) save(p *corev1.Pod, line string) {
	path := os.Getenv("ESTUARY_CHAOS_MANAGER_LOG")
	if path == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	_, _ = fmt.Fprintf(f, "%s %s\n", p.Name, line)
}

// finish stops following the logs.
func (l *managerLogs) finish() {
	l.once.Do(func() {
		l.cancel()
		<-l.done
	})
}

// counts are the manager pods that logged that fault injection is on, the
// manager pods seen, and the lines naming an injected fault.
func (l *managerLogs) counts() (faultOn, pods, lost int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.faultOn), len(l.following), len(l.lost)
}

// lostLines is up to n of the lines naming an injected fault.
func (l *managerLogs) lostLines(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.lost {
		_, line, _ := strings.Cut(k, " ")
		out = append(out, logError(line))
	}
	slices.Sort(out)
	return first(out, n)
}

// linesAbout is the last n lines naming the test's namespace that contain
// s, in time order, without their stack traces.
func (l *managerLogs) linesAbout(s string, n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range l.nsLines {
		if strings.Contains(line, s) {
			before, _, _ := strings.Cut(line, `,"stacktrace"`)
			out = append(out, before)
		}
	}
	slices.Sort(out)
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// logError is a timestamped log line of the manager cut to its time and
// its error field (the whole line when it has none).
func logError(line string) string {
	ts, msg, _ := strings.Cut(line, " ")
	var entry struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(msg), &entry); err != nil || entry.Error == "" {
		return line
	}
	return ts + " " + entry.Error
}
