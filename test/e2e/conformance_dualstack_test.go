//go:build lab

package e2e_test

import (
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/conformance"
)

// dualStackSubset are the upstream [Feature:IPv6DualStack] specs that make
// test runs on the dual-stack lab: nodes and pods with an address of each
// family, a Service with a ClusterIP of each, and the Granular Checks over
// the secondary family (IPv6), which send HTTP and UDP from a pod and from a
// node to a Service's IPv6 ClusterIP and on to pods on every node, and to
// hostNetwork endpoints (which also proves estuary's own host ports leave
// the upstream netservers' 8081 and 8083 free). make
// conformance IP_FAMILY=dual runs all of them (docs/conformance.md).
var dualStackSubset = []string{
	"should have at least one dual-stack node",
	"should create pod, add ipv6 and ipv4 ip to pod ips",
	"should create service with ipv4,v6 cluster ip",
	"Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: http",
	"Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: udp",
	"Granular Checks: Services Secondary IP Family [LinuxOnly] should function for node-Service: http",
	"Granular Checks: Services Secondary IP Family [LinuxOnly] should function for service endpoints using hostNetwork",
}

// TestDualStackUpstream runs dualStackSubset with the pinned Kubernetes
// version's own e2e.test against the dual-stack lab, and requires every one of
// them to run and pass.
func TestDualStackUpstream(t *testing.T) {
	e := needFamily(t, "dual")
	e.runUpstream(t, `\[sig-network\] \[Feature:IPv6DualStack\] `, dualStackSubset, "", conformance.SkipDualStack, 1, 10*time.Minute)
}
