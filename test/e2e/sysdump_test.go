//go:build lab

package e2e_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/nodereport"
)

// untar reads a .tar.gz into its files by path under its top directory.
func untar(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(h.Name, "/")
		files[rest] = string(b)
	}
}

// TestSysdumpOnTheLab runs `kubectl estuary sysdump` on the lab with a pod
// on every node, a Secret labelled as estuary's and a Node Event quoting
// its value. The archive must hold the logs of every daemon and manager
// pod, every node's state read through its daemon (the estvx4 tunnel, the
// node's pod route in table 1000 and its endpoint), estuary's objects, and
// neither that value nor the webhook certificate's private key, in any
// form; errors.txt must be empty on this healthy cluster.
func TestSysdumpOnTheLab(t *testing.T) {
	e := needLab(t)
	ctx := testCtx(t, 5*time.Minute)
	plugin := e.plugin(t)
	ns := e.newNamespace(t, "sysdump")
	e.mustCreate(t, ns, pausePods("dumped", len(e.nodes), e.nodes)...)
	pods := e.waitReady(t, ns, map[string]string{"app": "dumped"}, len(e.nodes), 3*time.Minute)

	planted := "e2e-sysdump-" + ns + "-pw"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: ns + "-bgp",
		Labels: map[string]string{"app.kubernetes.io/part-of": "estuary"}}, StringData: map[string]string{"password": planted}}
	event := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ns + "-node"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: e.nodes[0]}, Reason: "E2ESysdump", Type: "Normal",
		Message: "peer configured with password=" + planted, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1}
	for _, o := range []client.Object{secret, event} {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.c.Delete(ctx, o) })
	}
	var cert corev1.Secret
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "estuary-webhook-cert"}, &cert); err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]string{"planted value": planted, "planted value, base64": base64.StdEncoding.EncodeToString([]byte(planted))}
	for k, v := range cert.Data {
		if strings.HasSuffix(k, ".key") {
			forbidden["webhook "+k+", base64"] = base64.StdEncoding.EncodeToString(v)
			lines := strings.Split(strings.TrimSpace(string(v)), "\n")
			forbidden["webhook "+k+", a PEM line"] = lines[len(lines)/2]
		}
	}
	if len(forbidden) < 4 {
		t.Fatalf("the webhook Secret has no private key to look for: keys %v", keys(cert.Data))
	}

	file := filepath.Join(e.tmp, "sysdump.tar.gz")
	start := time.Now()
	cmd := exec.CommandContext(ctx, plugin, "sysdump", "--output", file)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl estuary sysdump: %v\n%s", err, out)
	}
	t.Logf("kubectl estuary sysdump --output %s took %s:\n%s", file, time.Since(start).Round(time.Millisecond), out)
	files := untar(t, file)
	t.Logf("archive: %d files, summary:\n%s", len(files), files["summary.txt"])
	logListing(t, files)
	t.Logf("nodes/%s/node-state.txt:\n%s", e.nodes[0], files["nodes/"+e.nodes[0]+"/node-state.txt"])
	if got := strings.TrimSpace(files["errors.txt"]); got != "none" {
		t.Errorf("errors.txt on a healthy lab:\n%s", got)
	}

	var estuaryPods corev1.PodList
	if err := e.c.List(ctx, &estuaryPods, client.InNamespace(systemNS)); err != nil {
		t.Fatal(err)
	}
	daemonLogs := 0
	for _, p := range estuaryPods.Items {
		name := p.Labels[nameLabel]
		if name != daemonName && name != managerName {
			continue
		}
		for _, c := range p.Spec.Containers {
			log := files["logs/"+p.Namespace+"/"+p.Name+"/"+c.Name+".log"]
			if strings.TrimSpace(log) == "" {
				t.Errorf("no log of %s/%s container %s in the archive", p.Namespace, p.Name, c.Name)
			}
		}
		if name == daemonName {
			daemonLogs++
		}
	}
	if daemonLogs != len(e.nodes) {
		t.Errorf("logs of %d daemon pods, want one per node (%d)", daemonLogs, len(e.nodes))
	}

	podIP := map[string]string{}
	for _, p := range pods {
		podIP[p.Spec.NodeName] = p.Status.PodIP
	}
	for _, node := range e.nodes {
		checkNodeState(t, files, node, podIP[node])
	}

	for _, f := range []string{"resources/networks.networking.estuary.io.yaml", "resources/subnets.networking.estuary.io.yaml",
		"resources/ipinstances.networking.estuary.io.yaml", "resources/daemonsets.apps.yaml", "resources/deployments.apps.yaml"} {
		if !strings.Contains(files[f], "kind: ") {
			t.Errorf("archive has no objects in %s", f)
		}
	}
	if !strings.Contains(files["resources/ipinstances.networking.estuary.io.yaml"], pods[0].Status.PodIP) {
		t.Errorf("the IPInstance of %s (%s) is not in the archive", pods[0].Name, pods[0].Status.PodIP)
	}
	if !strings.Contains(files["resources/events.yaml"], "E2ESysdump") {
		t.Error("the Node's Event is not in the archive")
	}
	if ref := "--webhook-cert-secret=" + systemNS + "/estuary-webhook-cert"; !strings.Contains(files["resources/deployments.apps.yaml"], ref) {
		t.Errorf("redaction took the manager's %s, a reference, not a credential", ref)
	}
	for name, content := range files {
		for what, v := range forbidden {
			if strings.Contains(content, v) {
				t.Errorf("%s holds the %s", name, what)
			}
		}
	}
}

// checkNodeState asserts that node's state is in the archive, read by its
// daemon, with the overlay's tunnel, the route and the endpoint of the pod
// at podIP.
func checkNodeState(t *testing.T, files map[string]string, node, podIP string) {
	t.Helper()
	raw, ok := files["nodes/"+node+"/node-state.json"]
	if !ok {
		t.Errorf("no state of node %s in the archive", node)
		return
	}
	var r nodereport.Report
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Errorf("node %s: %v", node, err)
		return
	}
	if r.Node != node || !strings.HasPrefix(r.Version, "estuary-daemon ") {
		t.Errorf("node %s's state says node %q, version %q", node, r.Node, r.Version)
	}
	if f := r.Failed(); len(f) > 0 {
		t.Errorf("node %s: sections not read: %q", node, f)
	}
	for sec, want := range map[string]string{
		"links":     " " + vxlanDevice + " vxlan ",
		"routes":    "table " + podTable + " ipv4 " + podIP + "/32 dev " + vethPrefix,
		"rules":     "ipv4 " + podTable + ": from all lookup " + podTable,
		"endpoints": " ips " + podIP + "/",
		"nftables":  "table ip estuary",
		"sysctls":   vxlanDevice + " ipv4.conf.forwarding=1",
	} {
		s, _ := r.Section(sec)
		if !strings.Contains(strings.Join(s.Lines, "\n"), want) {
			t.Errorf("node %s: section %s has no %q:\n%s", node, sec, want, strings.Join(s.Lines, "\n"))
		}
	}
	if !strings.Contains(files["nodes/"+node+"/node-state.txt"], "== routes (") {
		t.Errorf("node %s: no text rendering of its state", node)
	}
}

// logListing logs the archive's files with their sizes, and every line
// redaction changed, so that what was scrubbed can be judged.
func logListing(t *testing.T, files map[string]string) {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%9d  %s\n", len(files[n]), n)
		for _, l := range strings.Split(files[n], "\n") {
			if strings.Contains(l, "REDACTED") {
				fmt.Fprintf(&b, "           redacted: %.200s\n", strings.TrimSpace(l))
			}
		}
	}
	t.Logf("archive listing:\n%s", b.String())
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
