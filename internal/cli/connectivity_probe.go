package cli

// A probe runs inside the source probe pod through pods/exec, so what it
// measures is the pod's own network path, not the API server's: curl
// reports the TCP handshake time it saw (%{time_connect}), and ping the
// echo round trip. The exec's own round trip (API server, kubelet, runtime)
// is never counted. curl talks to agnhost netexec on the peer, whose
// /clientip says which address the peer saw (a pod-to-pod path must not be
// NATed) and /hostname which pod answered (a Service must reach its
// backend). Both tools are in the upstream agnhost image. Each command ends
// with a marker line carrying its exit status, so a failed probe still
// returns its output and its reason.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// probeContainer is the container of every probe pod; netexecPort is
// netexec's HTTP port in it.
const (
	probeContainer = "probe"
	netexecPort    = 8080
	servicePort    = 80
	// pings is how many echo requests one ICMP probe sends.
	pings = 3
)

// podExecFunc runs argv in a container of pod and returns what it wrote.
type podExecFunc func(ctx context.Context, pod *corev1.Pod, container string, argv []string) (stdout, stderr string, err error)

// newPodExec returns a podExecFunc over the API server of cfg: a
// websocket, or SPDY where the server cannot upgrade to one.
func newPodExec(cfg *rest.Config) (podExecFunc, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("core API client: %w", err)
	}
	rc := core.RESTClient()
	return func(ctx context.Context, pod *corev1.Pod, container string, argv []string) (string, string, error) {
		u := rc.Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
		spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			return "", "", fmt.Errorf("spdy executor: %w", err)
		}
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
		if err != nil {
			return "", "", fmt.Errorf("websocket executor: %w", err)
		}
		ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
		if err != nil {
			return "", "", fmt.Errorf("exec executor: %w", err)
		}
		var stdout, stderr bytes.Buffer
		err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
		return stdout.String(), stderr.String(), err
	}, nil
}

// target is what one probe reaches from its source pod.
type target struct {
	Host   string // an IP address, or the external target's host
	Port   int    // 0: ICMP only
	URL    string // path of the netexec request: /clientip or /hostname; empty: connect only
	Expect expect
	// Want is the address the peer must see (expectClientIP) or the
	// hostnames one of which must answer (expectHostname).
	Want []string
	ICMP bool
}

// measure is what a probe that passed measured; Denied is how a TCP
// connection that had to be denied failed.
type measure struct {
	TCP, ICMP *time.Duration
	Denied    string
}

// tcpArgv is the curl command of a TCP probe of url; with body the answer
// is printed, otherwise dropped.
func tcpArgv(url string, body bool, timeout time.Duration) []string {
	out := "/dev/null"
	if body {
		out = "-"
	}
	script := `curl -sS -m "$2" -o "$3" -w '\n@@curl %{time_connect} %{http_code}\n' "$1" 2>&1; echo "@@exit $?"`
	return []string{"sh", "-c", script, "sh", url, seconds(timeout), out}
}

// pingArgv is the ping command of an ICMP probe of addr.
func pingArgv(addr string, timeout time.Duration) []string {
	script := `ping -c "$3" -i 0.2 -W "$2" "$1" 2>&1; echo "@@exit $?"`
	return []string{"sh", "-c", script, "sh", addr, seconds(timeout), strconv.Itoa(pings)}
}

// seconds is d in whole seconds, at least 1, as the tools take it.
func seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// curlResult is what tcpArgv's command printed.
type curlResult struct {
	Body    string
	Connect time.Duration // 0: no connection was made
	Code    int           // HTTP status, 0 without an answer
	Exit    int
	Err     string // curl's error message
}

// parseCurl reads the output of tcpArgv's command.
func parseCurl(out string) (curlResult, error) {
	var r curlResult
	var body, errs []string
	seenCurl, seenExit := false, false
	for line := range strings.SplitSeq(out, "\n") {
		switch {
		case strings.HasPrefix(line, "@@curl "):
			f := strings.Fields(strings.TrimPrefix(line, "@@curl "))
			if len(f) != 2 {
				return r, fmt.Errorf("curl printed %q", line)
			}
			secs, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return r, fmt.Errorf("curl time_connect %q: %w", f[0], err)
			}
			r.Connect = time.Duration(secs * float64(time.Second))
			r.Code, _ = strconv.Atoi(f[1])
			seenCurl = true
		case strings.HasPrefix(line, "@@exit "):
			r.Exit, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "@@exit ")))
			seenExit = true
		case strings.HasPrefix(line, "curl: "), strings.HasPrefix(line, "sh: "):
			errs = append(errs, line)
		case !seenCurl:
			body = append(body, line)
		}
	}
	r.Body = strings.TrimSpace(strings.Join(body, "\n"))
	r.Err = strings.Join(errs, "; ")
	if !seenExit {
		return r, fmt.Errorf("the probe command did not finish: %q", strings.TrimSpace(out))
	}
	if !seenCurl {
		return r, fmt.Errorf("curl did not run (exit %d): %s", r.Exit, firstLine(out))
	}
	return r, nil
}

var (
	pingRTT      = regexp.MustCompile(`min/avg/max(?:/mdev)? = [0-9.]+/([0-9.]+)/`)
	pingReceived = regexp.MustCompile(`(\d+) (?:packets )?received`)
)

// pingResult is what pingArgv's command printed.
type pingResult struct {
	Received int
	Avg      time.Duration
	Exit     int
}

// parsePing reads the output of pingArgv's command.
func parsePing(out string) (pingResult, error) {
	var r pingResult
	i := strings.LastIndex(out, "@@exit ")
	if i < 0 {
		return r, fmt.Errorf("the probe command did not finish: %q", strings.TrimSpace(out))
	}
	r.Exit, _ = strconv.Atoi(strings.TrimSpace(out[i+len("@@exit "):]))
	m := pingReceived.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("ping (exit %d): %s", r.Exit, firstLine(out[:i]))
	}
	r.Received, _ = strconv.Atoi(m[1])
	if m := pingRTT.FindStringSubmatch(out); m != nil {
		ms, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return r, fmt.Errorf("ping round trip %q: %w", m[1], err)
		}
		r.Avg = time.Duration(ms * float64(time.Millisecond))
	}
	return r, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// judgeTCP says why a curl result does not show what t expects, or "".
func judgeTCP(t target, r curlResult) string {
	if t.Expect == expectDenied {
		if r.Connect > 0 {
			return fmt.Sprintf("connected (HTTP %d): no policy dropped it", r.Code)
		}
		return ""
	}
	if r.Connect <= 0 {
		if r.Err != "" {
			return r.Err
		}
		return fmt.Sprintf("no TCP connection (curl exit %d)", r.Exit)
	}
	if t.Expect == expectConnect {
		return ""
	}
	if r.Exit != 0 || r.Code != 200 {
		return fmt.Sprintf("connected, but no answer: HTTP %d, curl exit %d %s", r.Code, r.Exit, r.Err)
	}
	switch t.Expect {
	case expectClientIP:
		if host := clientHost(r.Body); !slices.Contains(t.Want, host) {
			return fmt.Sprintf("the peer saw the client as %s, not as %s (NAT on a path that must keep addresses)", orDash(host), strings.Join(t.Want, " or "))
		}
	case expectHostname:
		if !slices.Contains(t.Want, r.Body) {
			return fmt.Sprintf("%s answered, not %s", orDash(r.Body), strings.Join(t.Want, " or "))
		}
	}
	return ""
}

// clientHost is the address of netexec's /clientip answer "ip:port".
func clientHost(body string) string {
	if h, _, err := net.SplitHostPort(body); err == nil {
		return h
	}
	return body
}

// judgePing says why a ping result is not a pass, or "".
func judgePing(r pingResult) string {
	if r.Received < pings {
		return fmt.Sprintf("icmp: %d of %d echo replies", r.Received, pings)
	}
	return ""
}

// errProbe is a probe that ran and did not pass.
var errProbe = errors.New("probe failed")

// probeOnce runs t's probes once from src.
func probeOnce(ctx context.Context, run podExecFunc, src *corev1.Pod, t target, timeout time.Duration) (measure, error) {
	var m measure
	execCtx, cancel := context.WithTimeout(ctx, 2*timeout+30*time.Second)
	defer cancel()
	if t.Port != 0 {
		url := "http://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) + cmp.Or(t.URL, "/")
		out, stderr, err := run(execCtx, src, probeContainer, tcpArgv(url, t.URL != "", timeout))
		if err != nil {
			return m, execError(src, err, stderr)
		}
		r, err := parseCurl(out)
		if err != nil {
			return m, err
		}
		if why := judgeTCP(t, r); why != "" {
			return m, fmt.Errorf("%w: tcp %s: %s", errProbe, url, why)
		}
		if t.Expect == expectDenied {
			m.Denied = cmp.Or(r.Err, fmt.Sprintf("curl exit %d", r.Exit))
		} else {
			m.TCP = &r.Connect
		}
	}
	if t.ICMP {
		out, stderr, err := run(execCtx, src, probeContainer, pingArgv(t.Host, timeout))
		if err != nil {
			return m, execError(src, err, stderr)
		}
		r, err := parsePing(out)
		if err != nil {
			return m, err
		}
		if why := judgePing(r); why != "" {
			return m, fmt.Errorf("%w: %s: %s", errProbe, t.Host, why)
		}
		m.ICMP = &r.Avg
	}
	return m, nil
}

func execError(src *corev1.Pod, err error, stderr string) error {
	if msg := strings.TrimSpace(stderr); msg != "" {
		return fmt.Errorf("exec in pod %s/%s: %w: %s", src.Namespace, src.Name, err, msg)
	}
	return fmt.Errorf("exec in pod %s/%s: %w", src.Namespace, src.Name, err)
}

// probeUntil runs t's probes from src until they pass or timeout passes,
// every interval; it returns the passing measure, the attempts made, and
// the last failure.
func probeUntil(ctx context.Context, run podExecFunc, src *corev1.Pod, t target, probeTimeout, timeout, interval time.Duration) (measure, int, error) {
	deadline := time.Now().Add(timeout)
	for attempt := 1; ; attempt++ {
		m, err := probeOnce(ctx, run, src, t, probeTimeout)
		if err == nil || ctx.Err() != nil || time.Now().Add(interval).After(deadline) {
			return m, attempt, err
		}
		select {
		case <-ctx.Done():
			return m, attempt, err
		case <-time.After(interval):
		}
	}
}
