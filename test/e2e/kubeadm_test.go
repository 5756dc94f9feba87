//go:build lab

package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

// TestKubeadmClusterFromTheInstallGuide runs on a lab kubeadm made (make
// test-kubeadm, and make test's kubeadm phase): the cluster is kubeadm's own
// (static-pod control plane, kube-proxy DaemonSet, CoreDNS Deployment), it
// waited for a CNI as any fresh kubeadm cluster does (no node Ready, no
// CoreDNS replica ready before estuary), estuary was installed by the
// install guide's own steps, and CoreDNS went Ready only after estuary's
// daemon ran on its node.
func TestKubeadmClusterFromTheInstallGuide(t *testing.T) {
	e := needLab(t)
	k := e.kubeadm
	if k == nil {
		t.Skip("the lab was not made by kubeadm (ESTUARY_E2E_BOOTSTRAP=kubeadm, make test-kubeadm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("kubeadm made the cluster", func(t *testing.T) {
		if len(k.Init) < 2 || k.Init[1] != "init" || len(k.Join) < 2 || k.Join[1] != "join" {
			t.Errorf("recorded commands: init %q, join %q", k.Init, k.Join)
		}
		cp := e.nodes[0]
		for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			var p corev1.Pod
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: c + "-" + cp}, &p); err != nil {
				t.Errorf("static pod %s-%s: %v", c, cp, err)
				continue
			}
			if src := p.Annotations["kubernetes.io/config.source"]; src != "file" {
				t.Errorf("pod %s: config source %q, want file (a static pod kubeadm wrote)", p.Name, src)
			}
		}
		var ds appsv1.DaemonSet
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: "kube-proxy"}, &ds); err != nil {
			t.Fatalf("kubeadm's kube-proxy DaemonSet: %v", err)
		}
		if int(ds.Status.NumberReady) != len(e.nodes) {
			t.Errorf("kube-proxy ready on %d nodes, want %d", ds.Status.NumberReady, len(e.nodes))
		}
	})

	t.Run("the cluster waited for a CNI", func(t *testing.T) {
		if k.NodesReadyBeforeInstall != 0 || k.CoreDNSReadyBeforeInstall != 0 {
			t.Errorf("before estuary: %d nodes Ready, %d CoreDNS replicas ready; want 0 and 0",
				k.NodesReadyBeforeInstall, k.CoreDNSReadyBeforeInstall)
		}
		daemonReady := map[string]time.Time{}
		var daemons corev1.PodList
		if err := e.c.List(ctx, &daemons, client.InNamespace(systemNS), client.MatchingLabels{nameLabel: daemonName}); err != nil {
			t.Fatal(err)
		}
		for _, p := range daemons.Items {
			daemonReady[p.Spec.NodeName] = p.Status.StartTime.Time
		}
		var dns corev1.PodList
		if err := e.c.List(ctx, &dns, client.InNamespace(systemNS), client.MatchingLabels{"k8s-app": "kube-dns"}); err != nil {
			t.Fatal(err)
		}
		if len(dns.Items) == 0 {
			t.Fatal("no CoreDNS pods")
		}
		for _, p := range dns.Items {
			ready := readySince(p)
			started, ok := daemonReady[p.Spec.NodeName]
			switch {
			case ready.IsZero():
				t.Errorf("CoreDNS pod %s not Ready", p.Name)
			case !ok:
				t.Errorf("CoreDNS pod %s on %s, a node without estuary's daemon", p.Name, p.Spec.NodeName)
			case ready.Before(started):
				t.Errorf("CoreDNS pod %s Ready at %s, before estuary's daemon started on %s at %s", p.Name, ready, p.Spec.NodeName, started)
			}
		}
	})

	t.Run("estuary installed by the guide's own steps", func(t *testing.T) {
		if want := lab.DocInstallSteps; !slices.Equal(k.Steps, want) {
			t.Errorf("steps run %q, want %q", k.Steps, want)
		}
		guide, err := os.ReadFile(filepath.Clean(e.estuary.Values))
		if err != nil {
			t.Fatalf("the guide's values file: %v", err)
		}
		if filepath.Base(e.estuary.Values) != "estuary-values.yaml" {
			t.Errorf("the release's values are %s, not the guide's estuary-values.yaml", e.estuary.Values)
		}
		out, err := e.helm(ctx, "get", "values", lab.EstuaryRelease, "-n", lab.EstuaryNamespace, "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		if err := yaml.Unmarshal(guide, &want); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("release values %v, want the guide's %v", got, want)
		}
	})
}

// readySince is when the pod's Ready condition last turned true, or zero.
func readySince(p corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
