package cli

import (
	"archive/tar"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// readArchive returns every file of a .tar.gz by its path under the
// archive's single top directory.
func readArchive(t *testing.T, file string) map[string]string {
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
	tr := tar.NewReader(gz)
	files := map[string]string{}
	top := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dir, rest, _ := strings.Cut(h.Name, "/")
		if top != "" && dir != top {
			t.Fatalf("archive has two top directories, %s and %s", top, dir)
		}
		top = dir
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[rest] = string(b)
	}
	if !strings.HasPrefix(top, "estuary-sysdump-") {
		t.Fatalf("archive's top directory is %q", top)
	}
	return files
}

// estuaryLabels are the chart's labels of a component.
func estuaryLabels(component string) map[string]string {
	return map[string]string{partOfLabel: "estuary", nameLabel: "estuary-" + component, versionLabel: "0.0.0-test"}
}

// TestSysdumpCollectsObjectsAndNeverASecret runs sysdump against the test
// API server with estuary's objects, a Secret, and the Secret's value
// planted where sysdump does read (a ConfigMap, a container's env, an
// annotation copied whole, a Node annotation, an Event's message): the
// archive holds the objects, names the node and logs it could not read
// (the test server has no kubelet) in errors.txt, and has the Secret's
// value nowhere, in plain text or base64.
func TestSysdumpCollectsObjectsAndNeverASecret(t *testing.T) {
	ns := namespace(t)
	secret := "sysdump-secret-" + strings.ReplaceAll(ns, "-", "") + "-Zq9"
	node := "sysdump-" + ns
	create(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bgp-auth", Labels: estuaryLabels("daemon")},
			StringData: map[string]string{"password": secret}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{"networking.estuary.io/bgp-password": secret}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "estuary-config", Labels: estuaryLabels("manager")},
			Data: map[string]string{"bgp-password": secret, "kubeconfig": "users:\n- user:\n    token: " + secret + "\n", "mode": "overlay-mode-kept"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "estuary-manager", Labels: estuaryLabels("manager"),
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{"env":[{"name":"API_TOKEN","value":"` + secret + `"}]}}`}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{nameLabel: "estuary-manager"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: estuaryLabels("manager")},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "estuary-manager:test",
						Env: []corev1.EnvVar{{Name: "API_TOKEN", Value: secret}}}}}}}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "estuary-daemon", Labels: estuaryLabels("daemon")},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{nameLabel: "estuary-daemon"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: estuaryLabels("daemon")},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "daemon", Image: "estuary-daemon:test"}}}}}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-guard-" + ns}},
		&estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "sysdump-net-" + ns},
			Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, Mode: estuaryv1.NetworkModeVXLAN, NetID: ptr.To[int64](77)}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sysdump-node-event-" + ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node}, Reason: "FastPathRefused",
			Message: "fast path refused on " + node + " (password=" + secret + ")", Type: "Warning",
			LastTimestamp: metav1.Now(), FirstTimestamp: metav1.Now(), Count: 1, Source: corev1.EventSource{Component: "estuary-daemon"}},
	)
	subnetWithStatus(t, "sysdump-"+ns, "10.99.0.0/24", 254, 1)
	recordFor(t, "10.99.0.7/24", "sysdump-"+ns, ns, "web-0", "uid-1", estuaryv1.OwnerReference{Kind: "Pod", Name: "web-0"}, estuaryv1.IPInstanceBound)
	for _, c := range []string{"manager", "daemon"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "estuary-" + c + "-x", Labels: estuaryLabels(c)},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: c, Image: "estuary-" + c + ":test",
				Env: []corev1.EnvVar{{Name: "BGP_PASSWORD", Value: secret}}}}}}
		create(t, p)
		p.Status.Phase = corev1.PodRunning
		if err := k8s.Status().Update(bg(), p); err != nil {
			t.Fatal(err)
		}
	}

	file := filepath.Join(t.TempDir(), "dump.tar.gz")
	start := time.Now()
	out, err := run(t, "", "sysdump", "-n", ns, "--output", file, "--exec-timeout", "10s", "--log-timeout", "10s")
	if err != nil {
		t.Fatalf("sysdump: %v\n%s", err, out)
	}
	t.Logf("sysdump took %s", time.Since(start).Round(time.Millisecond))
	files := readArchive(t, file)

	for name, want := range map[string][]string{
		"resources/networks.networking.estuary.io.yaml":                 {"sysdump-net-" + ns},
		"resources/subnets.networking.estuary.io.yaml":                  {"sysdump-" + ns, "10.99.0.0/24"},
		"resources/ipinstances.networking.estuary.io.yaml":              {"10.99.0.7", "web-0"},
		"resources/customresourcedefinitions.apiextensions.k8s.io.yaml": {"networks.networking.estuary.io", "ipinstances.networking.estuary.io"},
		"resources/nodes.yaml":                                          {node},
		"resources/networkpolicies.networking.k8s.io.yaml":              {"tenant-guard-" + ns},
		"resources/deployments.apps.yaml":                               {"estuary-manager"},
		"resources/daemonsets.apps.yaml":                                {"estuary-daemon"},
		"resources/pods.yaml":                                           {"estuary-daemon-x", "estuary-manager-x"},
		"resources/configmaps.yaml":                                     {"estuary-config", "overlay-mode-kept"},
		"resources/events.yaml":                                         {"FastPathRefused", "fast path refused on " + node},
		"errors.txt":                                                    {"node " + node + ": exec", "log of " + ns + "/estuary-manager-x container manager"},
		"summary.txt":                                                   {"Deployment " + ns + "/estuary-manager", "kubectl-estuary"},
	} {
		got, ok := files[name]
		if !ok {
			t.Errorf("archive has no %s", name)
			continue
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s does not contain %q:\n%s", name, w, got)
			}
		}
	}
	// The node's policy drops are read by their own command, whose failure
	// is recorded too.
	if want := `exec "/estuary-daemon policy-drops -o json --node-name ` + node + `"`; !strings.Contains(files["errors.txt"], want) {
		t.Errorf("errors.txt does not contain %q:\n%s", want, files["errors.txt"])
	}
	for name, content := range files {
		if strings.Contains(name, "secret") {
			t.Errorf("archive holds %s", name)
		}
		for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))} {
			if strings.Contains(content, form) {
				t.Errorf("%s holds the Secret's value (%q)", name, form)
			}
		}
	}
	var sum sysdumpSummary
	if err := json.Unmarshal([]byte(files["summary.json"]), &sum); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if sum.Redacted < 5 || len(sum.Components) != 2 || len(sum.Failed) == 0 || sum.Cluster == "" {
		t.Errorf("summary: %d redacted (want >= 5), %d components (want 2), %d failures (want some), cluster %q",
			sum.Redacted, len(sum.Components), len(sum.Failed), sum.Cluster)
	}
}

// TestSysdumpRefusesBadFlags: flags out of range are refused before
// anything is read or written.
func TestSysdumpRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--node-concurrency", "0"}, {"--since", "-1h"}, {"--max-log-bytes", "10"}, {"--exec-timeout", "0s"},
	} {
		out, err := run(t, "", append([]string{"sysdump", "--output", filepath.Join(dir, "x.tar.gz")}, args...)...)
		if err == nil {
			t.Errorf("sysdump %v succeeded:\n%s", args, out)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused sysdumps left %d files", len(ents))
	}
}

// A log longer than --max-log-bytes keeps its most recent part, from a
// line's start, behind a line saying how much was left out; a short one is
// kept whole.
func TestTailBufferKeepsTheLastLines(t *testing.T) {
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "line %04d\n", i)
	}
	b := &tailBuffer{max: 1024}
	for _, chunk := range strings.SplitAfter(in.String(), "7") {
		_, _ = b.Write([]byte(chunk))
	}
	got := string(b.kept())
	head, rest, _ := strings.Cut(got, "\n")
	if !b.truncated() || !strings.HasPrefix(head, "[sysdump: the first ") || len(rest) > 1024 {
		t.Fatalf("kept %d bytes after %q (truncated %t)", len(rest), head, b.truncated())
	}
	if !strings.HasPrefix(rest, "line ") || !strings.HasSuffix(rest, "line 0999\n") {
		t.Errorf("kept part does not run from a line's start to the last line: %q ... %q", rest[:20], rest[len(rest)-20:])
	}
	if dropped := fmt.Sprintf("the first %d bytes", in.Len()-len(rest)); !strings.Contains(head, dropped) {
		t.Errorf("header %q, want %q", head, dropped)
	}
	short := &tailBuffer{max: 1024}
	_, _ = short.Write([]byte("one line\n"))
	if string(short.kept()) != "one line\n" || short.truncated() {
		t.Errorf("a short log became %q", short.kept())
	}
}
