//go:build lab

package e2e_test

// A real Prometheus scrapes the lab: Debian's prometheus binary (unpacked
// by hack/lab-deps.sh) runs in the control plane's network namespace, where
// the API server runs, and scrapes the manager and every daemon at their
// pods' addresses (the nodes', all hostNetwork) over HTTPS, as a cluster's
// Prometheus would through the chart's ServiceMonitors: with a short-lived
// token of its own ServiceAccount (TokenRequest), bound to the chart's
// estuary-metrics-reader, read from a file, and verifying each component's
// certificate with the CA the manager publishes (ConfigMap
// estuary-metrics-ca) and the component's metrics Service name.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// The chart's default metrics ports, and where Prometheus listens in the
// control plane's namespace.
const (
	managerMetricsPort = 9780
	daemonMetricsPort  = 9783
	prometheusAddr     = "127.0.0.1:19090"
	stormPods          = 20
	// tokenSeconds is the scraper's token's lifetime: the shortest the
	// TokenRequest API grants, longer than the test.
	tokenSeconds = 600
)

// TestPrometheusScrapesTheLab: Prometheus reaches every estuary target
// (up == 1 for the manager and each node's daemon) with a 10-minute token
// bound to estuary-metrics-reader, verifying every target's certificate
// with the published CA as its Service's name (no insecure_skip_verify);
// the same CA refuses a target presented under another name; /metrics
// refuses a request without a token (401) and a token no role allows
// (403); after a storm of 20 pods created and
// deleted, the CNI ADD and DEL counts, the allocations, the subnet's used
// addresses, the data-path reconciles and the webhook's latency histogram
// have moved in Prometheus's own answers.
func TestPrometheusScrapesTheLab(t *testing.T) {
	e := needLab(t)
	ctx := testCtx(t, 10*time.Minute)
	start := time.Now()
	ns := e.newNamespace(t, "prometheus")
	token := e.metricsReaderToken(t, ns, "scraper")
	stranger, err := testenv.ServiceAccountToken(ctx, e.c, ns, "stranger")
	if err != nil {
		t.Fatal(err)
	}
	ca := e.metricsCA(t)
	t.Logf("metrics CA published after %s", time.Since(start).Round(time.Second))
	managers, daemons := e.metricsTargets(t)
	for _, tg := range []struct {
		addrs  []string
		server string
	}{{managers, metricsServerName(managerName)}, {daemons, metricsServerName(daemonName)}} {
		for _, target := range tg.addrs {
			u := "https://" + target + "/metrics"
			for tok, want := range map[string]int{"": http.StatusUnauthorized, stranger: http.StatusForbidden} {
				if status, err := scrapeFrom(ctx, e.controlNetns, u, tok, ca, tg.server); err != nil || status != want {
					t.Errorf("GET %s as %s with token %t from the control plane: %d, %v; want %d", u, tg.server, tok != "", status, err, want)
				}
			}
			if _, err := scrapeFrom(ctx, e.controlNetns, u, token, ca, "elsewhere."+systemNS+".svc"); err == nil {
				t.Errorf("GET %s verified under another name succeeded", u)
			}
		}
	}

	prom := startPrometheus(t, e.controlNetns, token, ca, managers, daemons)
	eventually(t, "Prometheus scrapes every estuary target", time.Minute, func(ctx context.Context) error {
		return prom.allUp(ctx, len(managers)+len(daemons))
	})
	t.Logf("every target up and verified after %s", time.Since(start).Round(time.Second))
	before, err := prom.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before %d pods: %s", stormPods, before)
	used := `max(estuary_ipam_addresses{subnet="` + overlaySubnet + `",state="used"})`
	d := e.scaleStorm(t, ns, nil, stormPods)
	prom.waitAtLeast(t, used, before.used+stormPods)
	e.scaleStorm(t, ns, d, 0)
	for q, want := range map[string]float64{
		`sum(estuary_cni_request_duration_seconds_count{command="ADD",result="success"})`: before.adds + stormPods,
		`sum(estuary_cni_request_duration_seconds_count{command="DEL"})`:                  before.dels + stormPods,
		`sum(estuary_ipam_allocation_duration_seconds_count{result="ok"})`:                before.allocations + stormPods,
		`sum(estuary_datapath_reconcile_duration_seconds_count)`:                          before.reconciles + 1,
		`sum(controller_runtime_webhook_latency_seconds_count)`:                           before.webhook + stormPods,
		// Every address taken is given back: used goes down again.
		"-" + used: -before.used,
	} {
		prom.waitAtLeast(t, q, want)
	}
	after, err := prom.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d pods: %s", stormPods, after)
}

// waitAtLeast waits until Prometheus answers query with at least want.
func (p *prometheus) waitAtLeast(t *testing.T, query string, want float64) {
	t.Helper()
	eventually(t, "Prometheus answers "+query+" >= "+strconv.FormatFloat(want, 'f', -1, 64), time.Minute, func(ctx context.Context) error {
		got, err := p.value(ctx, query)
		if err != nil {
			return err
		}
		if got < want {
			return fmt.Errorf("%v, want at least %v", got, want)
		}
		return nil
	})
}

// metricsReaderToken is a token of ServiceAccount ns/name, valid for
// tokenSeconds, bound until the test ends to the chart's
// estuary-metrics-reader.
func (e *labEnv) metricsReaderToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "estuary-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if err := e.c.Create(ctx, b); err != nil {
		t.Fatalf("bind estuary-metrics-reader: %v", err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), b) })
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := e.c.Create(ctx, sa); err != nil {
		t.Fatalf("create service account %s/%s: %v", ns, name, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenSeconds)}}
	if err := e.c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	if left := time.Until(tr.Status.ExpirationTimestamp.Time); left > tokenSeconds*time.Second {
		t.Fatalf("token of %s/%s expires in %s, asked for %ds", ns, name, left, tokenSeconds)
	}
	return tr.Status.Token
}

// metricsServerName is the name a component's metrics certificate is
// verified as: its metrics Service's.
func metricsServerName(component string) string {
	return component + "-metrics." + systemNS + ".svc"
}

// metricsCA is the CA bundle the manager publishes in the ConfigMap
// estuary-metrics-ca, once it is there.
func (e *labEnv) metricsCA(t *testing.T) []byte {
	t.Helper()
	var ca []byte
	eventually(t, "the manager publishes the metrics CA", 2*time.Minute, func(ctx context.Context) error {
		var cm corev1.ConfigMap
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "estuary-metrics-ca"}, &cm); err != nil {
			return err
		}
		if !x509.NewCertPool().AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
			return fmt.Errorf("ConfigMap estuary-metrics-ca holds no certificate in ca.crt yet")
		}
		ca = []byte(cm.Data["ca.crt"])
		return nil
	})
	return ca
}

// metricsTargets are the manager's and the daemons' metrics endpoints:
// their pods' addresses (the nodes') and the chart's ports.
func (e *labEnv) metricsTargets(t *testing.T) (managers, daemons []string) {
	t.Helper()
	var pods corev1.PodList
	if err := e.c.List(testCtx(t, time.Minute), &pods, client.InNamespace(systemNS)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		switch p.Labels[nameLabel] {
		case managerName:
			managers = append(managers, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(managerMetricsPort)))
		case daemonName:
			daemons = append(daemons, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(daemonMetricsPort)))
		}
	}
	if len(managers) == 0 || len(daemons) < nodeCount {
		t.Fatalf("metrics targets: managers %v, daemons %v; want a manager and %d daemons", managers, daemons, nodeCount)
	}
	return managers, daemons
}

// scaleStorm scales the Deployment storm of pause pods (made when d is
// nil) over the lab's nodes to replicas, and waits until that many are
// ready, or, for 0, until they are gone.
func (e *labEnv) scaleStorm(t *testing.T, ns string, d *appsv1.Deployment, replicas int32) *appsv1.Deployment {
	t.Helper()
	sel := map[string]string{"app": "storm"}
	ctx := testCtx(t, time.Minute)
	if d == nil {
		d = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storm"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: podTemplate("", pauseContainer())},
			},
		}
		if err := e.c.Create(ctx, d); err != nil {
			t.Fatalf("create deployment storm: %v", err)
		}
	} else {
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(replicas)
		if err := e.c.Patch(ctx, d, patch); err != nil {
			t.Fatalf("scale deployment storm to %d: %v", replicas, err)
		}
	}
	if replicas == 0 {
		e.waitNoPods(t, ns, sel, 2*time.Minute)
	} else {
		e.waitReady(t, ns, sel, int(replicas), 2*time.Minute)
	}
	return d
}

// scrapeFrom GETs u over HTTPS from inside nsPath, with token as bearer
// token unless empty, verifying the certificate with ca as serverName, and
// returns the status.
func scrapeFrom(ctx context.Context, nsPath, u, token string, ca []byte, serverName string) (int, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	c := nsHTTPClient(nsPath)
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// prometheus is a Prometheus server running in a lab namespace.
type prometheus struct {
	netns, log string
}

// startPrometheus runs Debian's prometheus in nsPath, scraping the targets
// every 2s with token, verifying them with ca, until the test ends.
func startPrometheus(t *testing.T, nsPath, token string, ca []byte, managers, daemons []string) *prometheus {
	t.Helper()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	for f, b := range map[string][]byte{tokenFile: []byte(token), caFile: ca} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(scrapeConfig(tokenFile, caFile, managers, daemons)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &prometheus{netns: nsPath, log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net="+nsPath, bin, "--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+prometheusAddr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("prometheus log:\n%s", tail(string(b), 30))
		}
	})
	return p
}

// scrapeConfig scrapes the manager and the daemons as the chart's monitors
// name them (job estuary-manager and estuary-daemon), over HTTPS with the
// token in tokenFile, verifying each with the CA in caFile as its metrics
// Service's name.
func scrapeConfig(tokenFile, caFile string, managers, daemons []string) string {
	job := func(name string, targets []string) string {
		quoted := make([]string, len(targets))
		for i, t := range targets {
			quoted[i] = strconv.Quote(t)
		}
		return fmt.Sprintf(`  - job_name: %s
    scheme: https
    authorization:
      credentials_file: %s
    tls_config:
      ca_file: %s
      server_name: %s
    static_configs:
      - targets: [%s]
`, name, tokenFile, caFile, metricsServerName(name), strings.Join(quoted, ", "))
	}
	return "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\nscrape_configs:\n" +
		job(managerName, managers) + job(daemonName, daemons)
}

// prometheusBinary is $PROMETHEUS, else the one hack/lab-deps.sh unpacks.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMETHEUS"); p != "" {
		return p
	}
	cache := os.Getenv("ESTUARY_CACHE")
	if cache == "" {
		cache = "/var/cache/estuary"
	}
	p := filepath.Join(cache, "debs", "prometheus-root", "usr", "bin", "prometheus")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("prometheus is not unpacked (%v): run `make lab-deps` (hack/lab-deps.sh), or set PROMETHEUS", err)
	}
	return p
}

// apiGet GETs path of Prometheus's HTTP API and decodes its data.
func (p *prometheus) apiGet(ctx context.Context, path string, q url.Values, data any) error {
	body, err := httpGet(ctx, p.netns, "http://"+prometheusAddr+path+"?"+q.Encode())
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s %s: %s", path, q.Encode(), r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// allUp reports nil once want targets are scraped and every one is up.
func (p *prometheus) allUp(ctx context.Context, want int) error {
	var d struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
			LastError string `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.apiGet(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &d); err != nil {
		return err
	}
	var down []string
	for _, tg := range d.ActiveTargets {
		if tg.Health != "up" {
			down = append(down, fmt.Sprintf("%s %s %s", tg.ScrapeURL, tg.Health, tg.LastError))
		}
	}
	if len(d.ActiveTargets) != want || len(down) > 0 {
		return fmt.Errorf("%d targets of %d, not up: %s", len(d.ActiveTargets), want, strings.Join(down, "; "))
	}
	n, err := p.value(ctx, `count(up{job=~"estuary-manager|estuary-daemon"} == 1)`)
	if err != nil {
		return err
	}
	if int(n) != want {
		return fmt.Errorf("up == 1 for %v targets, want %d", n, want)
	}
	return nil
}

// value is the single value of an instant query; an empty result is an
// error.
func (p *prometheus) value(ctx context.Context, query string) (float64, error) {
	var d struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := p.apiGet(ctx, "/api/v1/query", url.Values{"query": {query}}, &d); err != nil {
		return 0, err
	}
	if d.ResultType != "vector" || len(d.Result) != 1 {
		return 0, fmt.Errorf("%s: %d results of type %s, want one", query, len(d.Result), d.ResultType)
	}
	s, _ := d.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// counts are the series the pod storm must move.
type counts struct {
	adds, dels, allocations, used, reconciles, webhook float64
}

func (c counts) String() string {
	return fmt.Sprintf("CNI ADD %v, DEL %v, allocations %v, used %v, reconciles %v, webhook reviews %v",
		c.adds, c.dels, c.allocations, c.used, c.reconciles, c.webhook)
}

// snapshot reads the counts from Prometheus; a series not there yet is 0.
func (p *prometheus) snapshot(ctx context.Context) (counts, error) {
	var c counts
	for q, v := range map[string]*float64{
		`sum(estuary_cni_request_duration_seconds_count{command="ADD",result="success"})`: &c.adds,
		`sum(estuary_cni_request_duration_seconds_count{command="DEL"})`:                  &c.dels,
		`sum(estuary_ipam_allocation_duration_seconds_count{result="ok"})`:                &c.allocations,
		`max(estuary_ipam_addresses{subnet="` + overlaySubnet + `",state="used"})`:        &c.used,
		`sum(estuary_datapath_reconcile_duration_seconds_count)`:                          &c.reconciles,
		`sum(controller_runtime_webhook_latency_seconds_count)`:                           &c.webhook,
	} {
		var err error
		if *v, err = p.value(ctx, q+" or vector(0)"); err != nil {
			return c, err
		}
	}
	return c, nil
}
