package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kubectl runs the lab's kubectl against the lab's admin kubeconfig.
func (l *Lab) kubectl(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", l.paths.Kubeconfig(), //nolint:gosec // G204: runs programs the lab located itself
		"--cache-dir", filepath.Join(l.paths.Root, "kubectl-cache")}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// NodeStatus is a node as the API server sees it.
type NodeStatus struct {
	Name    string `json:"name"`
	Ready   bool   `json:"ready"`
	PodCIDR string `json:"podCIDR,omitempty"`
	Version string `json:"kubeletVersion,omitempty"`
}

func (l *Lab) nodeStatuses(ctx context.Context, bin string) ([]NodeStatus, error) {
	out, err := l.kubectl(ctx, bin, "get", "nodes", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct{ PodCIDR string }
			Status   struct {
				Conditions []struct{ Type, Status string }
				NodeInfo   struct{ KubeletVersion string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("parse nodes: %w", err)
	}
	var res []NodeStatus
	for _, it := range list.Items {
		ns := NodeStatus{Name: it.Metadata.Name, PodCIDR: it.Spec.PodCIDR, Version: it.Status.NodeInfo.KubeletVersion}
		for _, c := range it.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ns.Ready = true
			}
		}
		res = append(res, ns)
	}
	return res, nil
}

// podCIDRPatch sets a Node's podCIDR (the first family's) and podCIDRs (every family's).
func podCIDRPatch(first netip.Prefix, all []netip.Prefix) string {
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"podCIDR": first.String(), "podCIDRs": all}})
	return string(b)
}

// waitNodes waits until every planned node is registered (and Ready, with
// wantReady), recording each node's pod CIDR on its Node object the first time it
// is seen (with --cni flannel kube-controller-manager allocates them).
func (l *Lab) waitNodes(ctx context.Context, bin string, wantReady bool) ([]NodeStatus, error) {
	patched := map[string]bool{}
	var last []NodeStatus
	var lastErr error
	for {
		if err := l.exited(); err != nil {
			return nil, err
		}
		st, err := l.nodeStatuses(ctx, bin)
		lastErr = err
		if err == nil {
			last = st
			ready := 0
			for _, n := range st {
				if m, ok := l.plan.Node(n.Name); ok && !patched[n.Name] && n.PodCIDR == "" && l.opts.CNI != "flannel" {
					patch := podCIDRPatch(m.PodCIDR, l.plan.NodePodCIDRs(n.Name))
					if _, err := l.kubectl(ctx, bin, "patch", "node", n.Name, "-p", patch); err == nil {
						patched[n.Name] = true
					}
				}
				if _, planned := l.plan.Node(n.Name); planned && (n.Ready || !wantReady) {
					ready++
				}
			}
			if ready == len(l.plan.Nodes) {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			what := "registered"
			if wantReady {
				what = "Ready"
			}
			return last, fmt.Errorf("nodes not %s (%v, last error %w): %w; see %s", what, last, lastErr, ctx.Err(), l.paths.Logs())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitServiceAccount waits for the default ServiceAccount, without which pods are refused.
func (l *Lab) waitServiceAccount(ctx context.Context, bin string) error {
	for {
		_, err := l.kubectl(ctx, bin, "get", "serviceaccount", "default", "-n", "default")
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("default ServiceAccount never appeared (%w): %w; see %s", err, ctx.Err(), l.paths.Log("kube-controller-manager"))
		case <-time.After(300 * time.Millisecond):
		}
	}
}
