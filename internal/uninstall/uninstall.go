// Package uninstall asks estuary's daemons to take estuary off their nodes
// and waits for their answers: the explicit uninstall behind the chart's
// pre-delete hook (`estuary-manager uninstall-nodes`) and `kubectl estuary
// uninstall`.
//
// The request is the annotation networking.estuary.io/uninstall on the
// daemons' DaemonSet (api/v1 AnnotationUninstallRequest), named afresh for
// every run so that each daemon answers it, even one that answered an
// earlier request. Each daemon answers on its Node
// (AnnotationUninstalled). The nodes waited for are those a daemon pod of
// the DaemonSet is scheduled to, read again at every poll: a node whose
// daemon does not run (NotReady, its pod Pending) is reported pending
// when the wait ends, and `estuary-daemon uninstall` cleans it by hand.
// Withdraw removes the request, and the daemons restart and install
// estuary again.
package uninstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// DefaultPoll is how often the answers are read.
const DefaultPoll = time.Second

// Options name the DaemonSet and pace the wait.
type Options struct {
	Namespace, DaemonSet string
	// Poll is how often the answers are read (DefaultPoll when zero).
	Poll time.Duration
	// Progress, when set, is called after every read.
	Progress func(Report)
	// now names the request; tests replace it.
	now func() time.Time
}

// NodeResult is one node's answer.
type NodeResult struct {
	Node string `json:"node"`
	// Pod is the daemon pod scheduled to the node.
	Pod string `json:"pod"`
	// Answered: the daemon answered this request.
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
	Done     string `json:"done,omitempty"`
}

// Report is every node's answer to one request.
type Report struct {
	Request string       `json:"request"`
	Nodes   []NodeResult `json:"nodes"`
}

// Pending returns the nodes that have not answered.
func (r Report) Pending() []string {
	var out []string
	for _, n := range r.Nodes {
		if !n.Answered {
			out = append(out, n.Node)
		}
	}
	return out
}

// Failed returns the nodes that answered with an error, with the error.
func (r Report) Failed() []string {
	var out []string
	for _, n := range r.Nodes {
		if n.Answered && n.Error != "" {
			out = append(out, n.Node+": "+n.Error)
		}
	}
	return out
}

// Request asks every daemon of the DaemonSet to take estuary off its node
// and waits until each answers or ctx ends. It returns the last report,
// and an error naming every node that failed or did not answer.
func Request(ctx context.Context, c client.Client, o Options) (Report, error) {
	o = o.withDefaults()
	ds, err := daemonSet(ctx, c, o)
	if err != nil {
		return Report{}, err
	}
	request := "uninstall-" + strconv.FormatInt(o.now().UnixNano(), 36)
	if err := annotate(ctx, c, ds, &request); err != nil {
		return Report{}, err
	}
	var report Report
	err = wait.PollUntilContextCancel(ctx, o.Poll, true, func(ctx context.Context) (bool, error) {
		r, err := read(ctx, c, ds, request)
		if err != nil {
			return false, err
		}
		report = r
		if o.Progress != nil {
			o.Progress(r)
		}
		return len(r.Nodes) > 0 && len(r.Pending()) == 0, nil
	})
	if report.Request == "" {
		report.Request = request
	}
	return report, outcome(report, err)
}

// outcome is Request's error: the wait's, or the nodes that failed.
func outcome(r Report, waitErr error) error {
	var errs []error
	if waitErr != nil {
		if p := r.Pending(); len(p) > 0 || len(r.Nodes) == 0 {
			errs = append(errs, fmt.Errorf("uninstall %s: %d node(s) did not answer (%s): run `estuary-daemon uninstall` on them: %w",
				r.Request, len(p), strings.Join(p, ", "), waitErr))
		} else {
			errs = append(errs, fmt.Errorf("uninstall %s: %w", r.Request, waitErr))
		}
	}
	if f := r.Failed(); len(f) > 0 {
		errs = append(errs, fmt.Errorf("uninstall %s: failed on %s", r.Request, strings.Join(f, "; ")))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o
}

// daemonSet reads the DaemonSet the request goes on.
func daemonSet(ctx context.Context, c client.Client, o Options) (*appsv1.DaemonSet, error) {
	ds := &appsv1.DaemonSet{}
	key := client.ObjectKey{Namespace: o.Namespace, Name: o.DaemonSet}
	if err := c.Get(ctx, key, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("DaemonSet %s not found: no daemon runs to take estuary off the nodes (run `estuary-daemon uninstall` on each node): %w", key, err)
		}
		return nil, fmt.Errorf("read DaemonSet %s: %w", key, err)
	}
	return ds, nil
}

// annotate sets the request on the DaemonSet; a nil request removes it.
func annotate(ctx context.Context, c client.Client, ds *appsv1.DaemonSet, request *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]*string{estuaryv1.AnnotationUninstallRequest: request}}})
	if err != nil {
		return fmt.Errorf("encode DaemonSet patch: %w", err)
	}
	if err := c.Patch(ctx, ds, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate DaemonSet %s/%s with %s: %w", ds.Namespace, ds.Name, estuaryv1.AnnotationUninstallRequest, err)
	}
	return nil
}

// read collects the answers of the nodes the DaemonSet's pods run on.
func read(ctx context.Context, c client.Client, ds *appsv1.DaemonSet, request string) (Report, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return Report{}, fmt.Errorf("DaemonSet %s/%s selector: %w", ds.Namespace, ds.Name, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ds.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return Report{}, fmt.Errorf("list the daemon pods of %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	r := Report{Request: request}
	seen := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || seen[p.Spec.NodeName] {
			continue
		}
		seen[p.Spec.NodeName] = true
		n := NodeResult{Node: p.Spec.NodeName, Pod: p.Name}
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: n.Node}, node); err != nil {
			return Report{}, fmt.Errorf("read Node %s: %w", n.Node, err)
		}
		if v, ok := node.Annotations[estuaryv1.AnnotationUninstalled]; ok {
			var st estuaryv1.NodeUninstallStatus
			if err := json.Unmarshal([]byte(v), &st); err == nil && st.Request == request {
				n.Answered, n.Error, n.Done = true, st.Error, st.Done
			}
		}
		r.Nodes = append(r.Nodes, n)
	}
	slices.SortFunc(r.Nodes, func(a, b NodeResult) int { return strings.Compare(a.Node, b.Node) })
	return r, nil
}

// Withdraw removes the request from the DaemonSet: its daemons restart and
// install estuary again.
func Withdraw(ctx context.Context, c client.Client, o Options) error {
	ds, err := daemonSet(ctx, c, o.withDefaults())
	if err != nil {
		return err
	}
	return annotate(ctx, c, ds, nil)
}

// ClearAnswers removes the daemons' answers from every Node, once they are
// read: nothing of the request stays on the Nodes.
func ClearAnswers(ctx context.Context, c client.Client) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list Nodes: %w", err)
	}
	patch := client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+estuaryv1.AnnotationUninstalled+`":null}}}`))
	var errs []error
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if _, ok := n.Annotations[estuaryv1.AnnotationUninstalled]; !ok {
			continue
		}
		if err := c.Patch(ctx, n, patch); err != nil {
			errs = append(errs, fmt.Errorf("clear %s on Node %s: %w", estuaryv1.AnnotationUninstalled, n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Run asks, waits, prints each node's answer to out and clears the
// answers; it returns the exit code of a command: 0 when every node
// answered without error.
func Run(ctx context.Context, c client.Client, o Options, out, errOut io.Writer) int {
	last := -1
	o.Progress = func(r Report) {
		if done := len(r.Nodes) - len(r.Pending()); done != last {
			last = done
			_, _ = fmt.Fprintf(out, "%s: %d of %d nodes answered\n", r.Request, done, len(r.Nodes))
		}
	}
	report, err := Request(ctx, c, o)
	for _, n := range report.Nodes {
		switch {
		case !n.Answered:
			_, _ = fmt.Fprintf(out, "%s\tpending\t(daemon pod %s did not answer)\n", n.Node, n.Pod)
		case n.Error != "":
			_, _ = fmt.Fprintf(out, "%s\tfailed\t%s\n", n.Node, n.Error)
		default:
			_, _ = fmt.Fprintf(out, "%s\tclean\t%s\n", n.Node, n.Done)
		}
	}
	if err != nil {
		_, _ = fmt.Fprintln(errOut, err)
		return 1
	}
	if err := ClearAnswers(context.WithoutCancel(ctx), c); err != nil {
		_, _ = fmt.Fprintln(errOut, err)
		return 1
	}
	return 0
}
