//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

// dnsLookupTimeout bounds one dig or curl in a pod.
const dnsLookupTimeout = 20 * time.Second

// TestClusterDNS: the lab's CoreDNS, behind Service kube-dns at the address
// kubelet gives pods, answers a pod on node-1 for kubernetes.default with the
// API Service's address and for a Service of the test, by its short name
// (the pod's search path) and by its FQDN, with its ClusterIP; an HTTP
// request to the Service by name reaches its backend on node-2.
func TestClusterDNS(t *testing.T) {
	e := needLab(t)
	e.checkKubeDNSService(t)
	ns := e.newNamespace(t, "dns")
	sel := map[string]string{"app": "dns-backend"}
	e.mustCreate(t, ns, netexecPod("backend", "node-2", sel), netexecPod("client", "node-1", nil))
	svc := e.createHTTPService(t, ns, "web", sel)
	e.waitPods(t, ns, "backend", "client")
	api := e.serviceIP(t, metav1.NamespaceDefault, "kubernetes")
	for _, c := range []struct{ what, name, want string }{
		{"kubernetes.default FQDN", "kubernetes.default.svc." + lab.ClusterDomain, api},
		{"service short name", "web", svc.Spec.ClusterIP},
		{"service FQDN", "web." + ns + ".svc." + lab.ClusterDomain, svc.Spec.ClusterIP},
	} {
		t.Run(c.what, func(t *testing.T) { e.waitResolves(t, ns, "client", c.name, c.want) })
	}
	t.Run("HTTP by name", func(t *testing.T) {
		var got string
		eventually(t, "client -> http://web/hostname", reachTimeout, func(ctx context.Context) error {
			var err error
			got, err = e.podExec(ctx, ns, "client", "curl", "-sS", "--max-time", "5", "http://web/hostname")
			return err
		})
		if got != "backend" {
			t.Errorf("http://web/hostname answered %q, want the backend pod's hostname %q", got, "backend")
		}
	})
}

// checkKubeDNSService: Service kube-system/kube-dns holds the address the
// lab's kubelets give pods as their nameserver.
func (e *labEnv) checkKubeDNSService(t *testing.T) {
	t.Helper()
	plan, err := lab.NewPlan(nodeCount)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.serviceIP(t, lab.DNSNamespace, "kube-dns"); got != plan.DNSService.String() {
		t.Fatalf("service %s/kube-dns has ClusterIP %s, want kubelet's clusterDNS %s", lab.DNSNamespace, got, plan.DNSService)
	}
}

// createHTTPService creates a ClusterIP Service name in ns, port 80 to the
// netexec HTTP port of the pods sel selects.
func (e *labEnv) createHTTPService(t *testing.T, ns, name string, sel map[string]string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(httpPort)},
		}},
	}
	if err := e.c.Create(testCtx(t, time.Minute), svc); err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	return svc
}

func (e *labEnv) serviceIP(t *testing.T, ns, name string) string {
	t.Helper()
	var svc corev1.Service
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatalf("service %s/%s: %v", ns, name, err)
	}
	return svc.Spec.ClusterIP
}

// waitResolves waits until `dig +short +search name` in pod answers exactly want.
func (e *labEnv) waitResolves(t *testing.T, ns, pod, name, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s/%s resolves %s to %s", ns, pod, name, want), reachTimeout, func(ctx context.Context) error {
		got, err := e.podExec(ctx, ns, pod, "dig", "+short", "+search", "+time=2", "+tries=2", name)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("dig +short +search %s answered %q", name, got)
		}
		return nil
	})
}

// labKubectl is the lab's kubectl and kubeconfig, read once from `estuary-lab status`.
var labKubectl struct {
	once            sync.Once
	bin, kubeconfig string
	err             error
}

// kubectlPaths returns the lab's kubectl binary and host kubeconfig.
func (e *labEnv) kubectlPaths() (bin, kubeconfig string, err error) {
	labKubectl.once.Do(func() {
		out, serr := exec.Command(e.bin, e.labArgs("status", "-o", "json")...).Output() // #nosec G204 -- test
		if serr != nil {
			labKubectl.err = fmt.Errorf("estuary-lab status: %w", serr)
			return
		}
		var s lab.Status
		if serr := json.Unmarshal(out, &s); serr != nil {
			labKubectl.err = fmt.Errorf("parse estuary-lab status: %w", serr)
			return
		}
		labKubectl.bin, labKubectl.kubeconfig = filepath.Join(s.BinDir, "kubectl"), s.Kubeconfig
	})
	return labKubectl.bin, labKubectl.kubeconfig, labKubectl.err
}

// podExec runs argv in the first container of pod ns/name (kubectl exec) and
// returns its trimmed standard output; a non-zero exit is an error.
func (e *labEnv) podExec(ctx context.Context, ns, name string, argv ...string) (string, error) {
	kubectl, kubeconfig, err := e.kubectlPaths()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, dnsLookupTimeout)
	defer cancel()
	args := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(e.tmp, "kubectl-cache"),
		"exec", "-n", ns, name, "--"}, argv...)
	cmd := exec.CommandContext(ctx, kubectl, args...) // #nosec G204 -- test
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl exec %s/%s -- %s: %w (stdout %q, stderr %q)", ns, name, strings.Join(argv, " "), err,
			strings.TrimSpace(string(out)), strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
