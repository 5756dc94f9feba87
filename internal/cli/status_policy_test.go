package cli

import (
	"strings"
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestStatusNamesKubeProxyIPVS: a node whose daemon published the IPVS
// problem fails status (exit 3) with the problem named; one in iptables
// mode shows the mode as a fact and stays healthy.
func TestStatusNamesKubeProxyIPVS(t *testing.T) {
	f := newStatusFixture(t)
	f.annotate(t, f.nodeA, estuaryv1.AnnotationDaemonStatus,
		`{"version":"v0.0.0-test","conflist":{"path":"/etc/cni/net.d/10-estuary.conflist","installed":true},"fastPath":{"state":"Loaded"},`+
			`"policy":{"kubeProxyMode":"iptables"}}`)
	out, err := f.status(t)
	if err != nil || !strings.Contains(out, "kube-proxy iptables mode") {
		t.Fatalf("iptables mode: status = %v, want healthy with the mode shown\n%s", err, out)
	}
	f.annotate(t, f.nodeB, estuaryv1.AnnotationDaemonStatus,
		`{"version":"v0.0.0-test","conflist":{"path":"/etc/cni/net.d/10-estuary.conflist","installed":true},"fastPath":{"state":"Loaded"},`+
			`"policy":{"kubeProxyMode":"ipvs","problem":"kube-proxy runs in IPVS mode: the backend's ingress policy does not judge it"}}`)
	f.wantProblem(t, f.nodeB, "network policy: kube-proxy runs in IPVS mode")
}
