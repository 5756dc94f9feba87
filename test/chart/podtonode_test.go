package chart

import (
	"slices"
	"strings"
	"testing"
)

// TestPodToNodeTrafficValue: networkPolicy.podToNodeTraffic renders the
// daemon's --pod-to-node-traffic, allow by default (Kubernetes' rule) and
// policy when asked; the schema refuses any other value, naming the field.
func TestPodToNodeTrafficValue(t *testing.T) {
	if args := daemonArgs(t); !slices.Contains(args, "--pod-to-node-traffic=allow") {
		t.Errorf("default daemon args %v lack --pod-to-node-traffic=allow", args)
	}
	args := daemonArgs(t, "--set", "networkPolicy.podToNodeTraffic=policy")
	if !slices.Contains(args, "--pod-to-node-traffic=policy") || slices.Contains(args, "--pod-to-node-traffic=allow") {
		t.Errorf("daemon args %v: want --pod-to-node-traffic=policy only", args)
	}
	_, err := renderErr(t, "--set", "networkPolicy.podToNodeTraffic=deny")
	if err == nil || !strings.Contains(err.Error(), "podToNodeTraffic") {
		t.Errorf("podToNodeTraffic=deny: %v, want a schema error naming the field", err)
	}
}
