package chart

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// daemonArgs are the args of the rendered estuary-daemon container.
func daemonArgs(t *testing.T, args ...string) []string {
	t.Helper()
	var ds appsv1.DaemonSet
	convert(t, find(t, render(t, args...), "DaemonSet", "estuary-daemon"), &ds)
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "estuary-daemon" || len(ds.Spec.Template.Spec.Containers) == 1 {
			return c.Args
		}
	}
	t.Fatalf("DaemonSet estuary-daemon has no container estuary-daemon")
	return nil
}

// managerArgs are the args of the rendered estuary-manager container.
func managerArgs(t *testing.T, args ...string) []string {
	t.Helper()
	var d appsv1.Deployment
	convert(t, find(t, render(t, args...), "Deployment", "estuary-manager"), &d)
	return d.Spec.Template.Spec.Containers[0].Args
}

// TestNetworkPolicyOnByDefault: every render has the daemons enforce
// policy, and none renders another enforcer (kube-network-policies is no
// longer part of the chart).
func TestNetworkPolicyOnByDefault(t *testing.T) {
	if args := daemonArgs(t); !slices.Contains(args, "--network-policy=true") {
		t.Errorf("daemon args %v lack --network-policy=true", args)
	}
	if args := managerArgs(t); !slices.Contains(args, "--policy-status=true") {
		t.Errorf("manager args %v lack --policy-status=true", args)
	}
	for name, objs := range renders(t) {
		for _, o := range objs {
			if strings.Contains(o.GetName(), "kube-network-policies") {
				t.Errorf("%s: rendered %s %s", name, o.GetKind(), o.GetName())
			}
		}
	}
}

// TestNetworkPolicyOff: networkPolicy.enabled=false has the daemons remove
// their policy table and the manager report no policy status.
func TestNetworkPolicyOff(t *testing.T) {
	if args := daemonArgs(t, "--set", "networkPolicy.enabled=false"); !slices.Contains(args, "--network-policy=false") {
		t.Errorf("daemon args %v lack --network-policy=false", args)
	}
	// Nothing enforces policy: the manager reports no status either.
	if args := managerArgs(t, "--set", "networkPolicy.enabled=false"); !slices.Contains(args, "--policy-status=false") {
		t.Errorf("manager args %v lack --policy-status=false", args)
	}
}

// TestNetworkPolicyOldValuesAccepted: the values of the former
// kube-network-policies option still pass the schema (an upgrade with
// --reuse-values keeps them) and change nothing that is rendered.
func TestNetworkPolicyOldValuesAccepted(t *testing.T) {
	plain := render(t)
	old := render(t, "--set", "networkPolicy.image.tag=v0.8.0", "--set", "networkPolicy.nfqueueID=98",
		"--set", "networkPolicy.extraArgs[0]=--fail-open")
	if len(plain) != len(old) {
		t.Fatalf("old values render %d objects, want %d", len(old), len(plain))
	}
	for i := range plain {
		if plain[i].GetKind() != old[i].GetKind() || plain[i].GetName() != old[i].GetName() {
			t.Errorf("object %d: %s %s, want %s %s", i, old[i].GetKind(), old[i].GetName(), plain[i].GetKind(), plain[i].GetName())
		}
	}
	if _, err := renderErr(t, "--set", "networkPolicy.unknown=1"); err == nil {
		t.Error("an unknown networkPolicy value passed the schema")
	}
}
