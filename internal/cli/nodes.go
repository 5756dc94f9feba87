package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	endpointsv1 "github.com/estuary-cni/estuary/api/endpoints/v1"
	"github.com/estuary-cni/estuary/internal/ipamcheck"
)

// Where check finds the daemon pods by default: the chart's namespace in
// the README's install and its daemon pods' selector label.
const (
	defaultDaemonNamespace = "kube-system"
	defaultDaemonSelector  = "app.kubernetes.io/name=estuary-daemon"
	// daemonContainer and daemonBinary are the chart's container and the
	// image's binary, used when the pod does not say otherwise.
	daemonContainer = "daemon"
	daemonBinary    = "/estuary-daemon"
	healthFlag      = "health-probe-bind-address"
)

// nodeExecTimeout bounds one node's exec.
const nodeExecTimeout = 30 * time.Second

// daemonEndpoints reads a node's daemon endpoints by running
// `estuary-daemon endpoints` in the node's daemon pod (pods/exec).
type daemonEndpoints struct {
	k        client.Reader
	cfg      *rest.Config
	core     rest.Interface
	ns       string
	selector labels.Selector
}

func newDaemonEndpoints(cfg *rest.Config, k client.Reader, ns, selector string) (*daemonEndpoints, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("--daemon-selector %q: %w", selector, err)
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("core API client: %w", err)
	}
	return &daemonEndpoints{k: k, cfg: cfg, core: core.RESTClient(), ns: ns, selector: sel}, nil
}

// Endpoints runs `estuary-daemon endpoints` in node's daemon pod and
// decodes what it prints.
func (d *daemonEndpoints) Endpoints(ctx context.Context, node string) ([]endpointsv1.Endpoint, error) {
	pod, err := d.daemonPod(ctx, node)
	if err != nil {
		return nil, err
	}
	c := container(pod)
	argv := endpointsArgv(c)
	ctx, cancel := context.WithTimeout(ctx, nodeExecTimeout)
	defer cancel()
	out, err := d.exec(ctx, pod, c.Name, argv)
	if err != nil {
		return nil, fmt.Errorf("exec %q in pod %s/%s (container %s): %w", strings.Join(argv, " "), pod.Namespace, pod.Name, c.Name, err)
	}
	var list endpointsv1.NodeEndpointList
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("pod %s/%s printed no endpoint list: %w", pod.Namespace, pod.Name, err)
	}
	if list.Node != "" && list.Node != node {
		return nil, fmt.Errorf("pod %s/%s on node %s answered for node %s", pod.Namespace, pod.Name, node, list.Node)
	}
	return list.Endpoints, nil
}

// daemonPod is the running daemon pod on node.
func (d *daemonEndpoints) daemonPod(ctx context.Context, node string) (*corev1.Pod, error) {
	var pods corev1.PodList
	err := d.k.List(ctx, &pods, client.InNamespace(d.ns), client.MatchingLabelsSelector{Selector: d.selector},
		client.MatchingFields{"spec.nodeName": node})
	if err != nil {
		return nil, fmt.Errorf("list daemon pods of node %s in %s (%s): %w", node, d.ns, d.selector, err)
	}
	var notRunning []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, nil
		}
		notRunning = append(notRunning, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
	}
	if len(notRunning) > 0 {
		return nil, fmt.Errorf("no daemon pod runs on node %s: %s in %s", node, strings.Join(notRunning, ", "), d.ns)
	}
	return nil, fmt.Errorf("%w (namespace %s, selector %s; see --daemon-namespace, --daemon-selector)", ipamcheck.ErrNoDaemon, d.ns, d.selector)
}

// container is the daemon container of pod: the chart's name, else the
// first.
func container(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == daemonContainer {
			return &pod.Spec.Containers[i]
		}
	}
	return &pod.Spec.Containers[0]
}

// endpointsArgv is the command that prints the daemon's endpoints: the
// container's own binary, told the health address its daemon was given.
func endpointsArgv(c *corev1.Container) []string {
	bin := daemonBinary
	if len(c.Command) > 0 {
		bin = c.Command[0]
	}
	argv := []string{bin, "endpoints"}
	if addr, ok := flagValue(append(c.Command[min(1, len(c.Command)):], c.Args...), healthFlag); ok {
		argv = append(argv, "--health-address", addr)
	}
	return argv
}

// flagValue finds --name=value, -name=value or --name value in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		f := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if f == a {
			continue
		}
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v, true
		}
		if f == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// exec runs argv in a container of pod and returns its standard output,
// over a websocket, or SPDY where the API server cannot upgrade to one.
func (d *daemonEndpoints) exec(ctx context.Context, pod *corev1.Pod, ctr string, argv []string) ([]byte, error) {
	u := d.core.Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: ctr, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	spdy, err := remotecommand.NewSPDYExecutor(d.cfg, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("spdy executor: %w", err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(d.cfg, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("websocket executor: %w", err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("exec executor: %w", err)
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%w: %s", err, msg)
		}
		return nil, err
	}
	return stdout.Bytes(), nil
}
