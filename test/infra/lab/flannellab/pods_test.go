//go:build lab

package flannellab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

const podNS = "flannel-check"

type pod struct {
	name, node string
	ip         netip.Addr
}

// checkPods runs one agnhost netexec pod on every node, each with an address
// of its node's lease, then proves that every pod reaches every pod on the
// other nodes by ping and by TCP (HTTP to netexec, which answers with the
// pod's name).
func checkPods(t *testing.T, e *env, names []string, leases map[string]lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := e.kubectl(ctx, "create", "namespace", podNS); err != nil {
		t.Fatal(err)
	}
	var manifest []any
	for _, n := range names {
		manifest = append(manifest, map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "netexec-" + n, "namespace": podNS},
			"spec": map[string]any{
				"nodeName":                      n,
				"terminationGracePeriodSeconds": 0,
				"containers": []any{map[string]any{
					"name": "netexec", "image": lab.AgnhostImage, "imagePullPolicy": "Never",
					"args": []string{"netexec", "--http-port=8080"},
				}},
			},
		})
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": manifest})
	if err != nil {
		t.Fatal(err)
	}
	cmd := []string{"apply", "-f", "-"}
	if out, err := e.kubectlStdin(ctx, string(b), cmd...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	start := time.Now()
	var pods []pod
	eventually(t, "a netexec pod Running on every node", 3*time.Minute, func(ctx context.Context) error {
		var err error
		pods, err = e.runningPods(ctx)
		return err
	})
	t.Logf("%d pods Running %s after apply", len(pods), time.Since(start).Round(100*time.Millisecond))
	for _, p := range pods {
		if !leases[p.node].subnet.Contains(p.ip) {
			t.Errorf("pod %s on %s has %s, outside the node's lease %s", p.name, p.node, p.ip, leases[p.node].subnet)
		}
	}
	for _, from := range pods {
		for _, to := range pods {
			if from.node == to.node {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, err := e.kubectl(ctx, "exec", "-n", podNS, from.name, "--", "ping", "-c", "3", "-W", "2", to.ip.String())
			if err != nil || !strings.Contains(out, " 0% packet loss") {
				t.Errorf("ping %s (%s) -> %s (%s): %v\n%s", from.name, from.node, to.name, to.ip, err, out)
			}
			url := fmt.Sprintf("http://%s/hostname", netip.AddrPortFrom(to.ip, 8080))
			out, err = e.kubectl(ctx, "exec", "-n", podNS, from.name, "--", "curl", "-sS", "-m", "5", url)
			if err != nil || strings.TrimSpace(out) != to.name {
				t.Errorf("TCP %s (%s) -> %s: %q, %v (want %s)", from.name, from.node, url, out, err, to.name)
			}
			cancel()
		}
	}
}

func (e *env) runningPods(ctx context.Context) ([]pod, error) {
	out, err := e.kubectl(ctx, "get", "pods", "-n", podNS, "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct{ NodeName string }
			Status   struct{ Phase, PodIP string }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("parse pods: %w", err)
	}
	var pods []pod
	seen := map[string]bool{}
	for _, p := range list.Items {
		if p.Status.Phase != "Running" || p.Status.PodIP == "" {
			return nil, fmt.Errorf("pod %s on %s: %s", p.Metadata.Name, p.Spec.NodeName, p.Status.Phase)
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Metadata.Name, err)
		}
		pods = append(pods, pod{name: p.Metadata.Name, node: p.Spec.NodeName, ip: ip})
		seen[p.Spec.NodeName] = true
	}
	if len(seen) != nodes {
		return nil, fmt.Errorf("pods Running on %d nodes, want %d", len(seen), nodes)
	}
	return pods, nil
}
